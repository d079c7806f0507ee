package storage

// Admission webhooks: validation, the version of the set, and when an
// update changes nothing.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/no8s/no8s/services/internal/webhookconf"
)

// ListWebhooksResult is every webhook and the version of the set.
type ListWebhooksResult struct {
	// Webhooks are ordered by type, ordering and name.
	Webhooks []*webhookconf.Webhook
	// SetVersion changes whenever a webhook is created, updated or deleted.
	SetVersion string
	// NotModified is set, and Webhooks nil, when SetVersion equals the
	// version the caller already has.
	NotModified bool
}

// CheckWebhook validates a webhook's registration and returns its
// operations and its namespaces as stored (JSON arrays; no namespaces: []).
func CheckWebhook(w *webhookconf.Webhook) (ops, namespaces []byte, err error) {
	if errs := webhookconf.Validate(w); len(errs) > 0 {
		return nil, nil, NewError(ErrInvalid, "invalid admission webhook").WithFields(fieldsOf(errs)...)
	}
	if ops, err = json.Marshal(w.Operations); err != nil {
		return nil, nil, err
	}
	if len(w.Namespaces) == 0 {
		return ops, []byte("[]"), nil
	}
	namespaces, err = json.Marshal(w.Namespaces)
	return ops, namespaces, err
}

// DecodeNamespaces reads a webhook's stored namespaces (nil when it has
// none: every namespace).
func DecodeNamespaces(stored []byte) ([]string, error) {
	var out []string
	if len(stored) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(stored, &out); err != nil {
		return nil, fmt.Errorf("decode webhook namespaces: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// WebhookNameTaken turns a backend's ErrNameTaken on a webhook write into
// the error naming the webhook; other errors are returned as they are.
func WebhookNameTaken(err error, name string) error {
	if errors.Is(err, ErrNameTaken) {
		return NewError(ErrNameTaken, "admission webhook %q already exists", name).
			WithFields(FieldError{Path: "/name", Message: "already taken"})
	}
	return err
}

// SetVersion is the version of the webhook set: its largest revision and
// its count. A backend serializes webhook writes, and every create and
// update takes a new, larger revision, so a change either raises the
// largest revision or, when it only deletes, lowers the count (or both).
func SetVersion(maxRevision int64, count int) string {
	return fmt.Sprintf("%d.%d", maxRevision, count)
}

// ListWebhooks answers a ListWebhooks call from a backend's two reads:
// version reads the largest revision and the count of the set (one cheap
// query, made only when the caller has a version, unless), list reads every
// webhook ordered by type, ordering and name. The set version of a full
// answer comes from the rows read, so it always describes them.
func ListWebhooks(unless string, version func() (maxRevision int64, count int, err error), list func() ([]*webhookconf.Webhook, error)) (*ListWebhooksResult, error) {
	if unless != "" {
		maxRev, n, err := version()
		if err != nil {
			return nil, err
		}
		if v := SetVersion(maxRev, n); v == unless {
			return &ListWebhooksResult{SetVersion: v, NotModified: true}, nil
		}
	}
	ws, err := list()
	if err != nil {
		return nil, err
	}
	var maxRev int64
	for _, w := range ws {
		maxRev = max(maxRev, w.ResourceVersion)
	}
	if ws == nil {
		ws = []*webhookconf.Webhook{}
	}
	return &ListWebhooksResult{Webhooks: ws, SetVersion: SetVersion(maxRev, len(ws))}, nil
}

// SameRegistration reports whether two webhooks register the same thing
// (an update that changes nothing writes nothing).
func SameRegistration(a, b *webhookconf.Webhook) bool {
	return a.Name == b.Name && a.ResourceTypeName == b.ResourceTypeName && a.ResourceTypeVersion == b.ResourceTypeVersion &&
		slices.Equal(a.Namespaces, b.Namespaces) &&
		a.URL == b.URL && a.Type == b.Type && slices.Equal(a.Operations, b.Operations) && a.TimeoutSeconds == b.TimeoutSeconds &&
		a.FailurePolicy == b.FailurePolicy && a.Ordering == b.Ordering && a.CABundle == b.CABundle
}
