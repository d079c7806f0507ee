package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/webhookconf"
)

const webhookColumns = `id, name, resource_type_name, resource_type_version, webhook_url, webhook_type, operations,
	timeout_seconds, failure_policy, ordering, ca_bundle, resource_version, created_at, updated_at`

func scanWebhook(row pgx.Row) (*webhookconf.Webhook, error) {
	var w webhookconf.Webhook
	var typeName, typeVersion, ca *string
	var ops []byte
	if err := row.Scan(&w.ID, &w.Name, &typeName, &typeVersion, &w.URL, &w.Type, &ops,
		&w.TimeoutSeconds, &w.FailurePolicy, &w.Ordering, &ca, &w.ResourceVersion, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(ops, &w.Operations); err != nil {
		return nil, fmt.Errorf("webhook %d: decode operations: %w", w.ID, err)
	}
	w.ResourceTypeName, w.ResourceTypeVersion, w.CABundle = deref(typeName), deref(typeVersion), deref(ca)
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return &w, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func checkWebhook(w *webhookconf.Webhook) ([]byte, error) {
	if errs := webhookconf.Validate(w); len(errs) > 0 {
		return nil, newError(ErrInvalid, "invalid admission webhook").withFields(fieldsOf(errs)...)
	}
	return json.Marshal(w.Operations)
}

// lockWebhooks serializes webhook writes, so that they commit in the order
// of their revisions and a reader's snapshot always holds a prefix of them:
// that is what makes ListWebhooks' set version change whenever the set does.
// Readers are not blocked.
func lockWebhooks(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `LOCK TABLE admission_webhooks IN SHARE ROW EXCLUSIVE MODE`)
	return err
}

func nameTaken(err error, name string) error {
	if errors.Is(err, ErrNameTaken) {
		return newError(ErrNameTaken, "admission webhook %q already exists", name).
			withFields(FieldError{Path: "/name", Message: "already taken"})
	}
	return err
}

// CreateWebhook registers an admission webhook.
func (s *Store) CreateWebhook(ctx context.Context, w webhookconf.Webhook, dryRun bool) (*webhookconf.Webhook, error) {
	ops, err := checkWebhook(&w)
	if err != nil {
		return nil, err
	}
	var out *webhookconf.Webhook
	err = s.write(ctx, dryRun, func(tx pgx.Tx) error {
		if err := lockWebhooks(ctx, tx); err != nil {
			return err
		}
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanWebhook(tx.QueryRow(ctx, `INSERT INTO admission_webhooks (name, resource_type_name, resource_type_version,
			webhook_url, webhook_type, operations, timeout_seconds, failure_policy, ordering, ca_bundle, resource_version, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) RETURNING `+webhookColumns,
			w.Name, nullable(w.ResourceTypeName), nullable(w.ResourceTypeVersion), w.URL, w.Type, ops,
			w.TimeoutSeconds, w.FailurePolicy, w.Ordering, nullable(w.CABundle), rev, now))
		return err
	})
	if err != nil {
		return nil, nameTaken(err, w.Name)
	}
	return out, nil
}

// GetWebhook returns one webhook.
func (s *Store) GetWebhook(ctx context.Context, id int64) (*webhookconf.Webhook, error) {
	w, err := scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("admission webhook %d not found", id)
	}
	return w, translate(err)
}

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

// setVersion is the largest revision and the count of the set. Writes are
// serialized and every create and update takes a new, larger revision, so a
// change either raises the largest revision or, when it only deletes,
// lowers the count (or both).
func setVersion(maxRevision int64, count int) string {
	return fmt.Sprintf("%d.%d", maxRevision, count)
}

// ListWebhooks lists every webhook unless the set's version is unless: then
// it answers NotModified with one cheap query.
func (s *Store) ListWebhooks(ctx context.Context, unless string) (*ListWebhooksResult, error) {
	if unless != "" {
		var maxRev int64
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(resource_version), 0), count(*) FROM admission_webhooks`).Scan(&maxRev, &n); err != nil {
			return nil, translate(err)
		}
		if v := setVersion(maxRev, n); v == unless {
			return &ListWebhooksResult{SetVersion: v, NotModified: true}, nil
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks ORDER BY webhook_type, ordering, name`)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := &ListWebhooksResult{Webhooks: []*webhookconf.Webhook{}}
	var maxRev int64
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, translate(err)
		}
		maxRev = max(maxRev, w.ResourceVersion)
		out.Webhooks = append(out.Webhooks, w)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	// The version comes from the rows read, so it always describes them.
	out.SetVersion = setVersion(maxRev, len(out.Webhooks))
	return out, nil
}

// UpdateWebhook replaces every registration field of webhook w.ID. A
// non-zero expected must equal the current resource_version.
func (s *Store) UpdateWebhook(ctx context.Context, w webhookconf.Webhook, expected int64, dryRun bool) (*webhookconf.Webhook, error) {
	ops, err := checkWebhook(&w)
	if err != nil {
		return nil, err
	}
	var out *webhookconf.Webhook
	err = s.write(ctx, dryRun, func(tx pgx.Tx) error {
		if err := lockWebhooks(ctx, tx); err != nil {
			return err
		}
		cur, err := scanWebhook(tx.QueryRow(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks WHERE id = $1`, w.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("admission webhook %d not found", w.ID)
		}
		if err != nil {
			return err
		}
		if expected != 0 && expected != cur.ResourceVersion {
			return newError(ErrConflict,
				"admission webhook %d has resource_version %d, not %d: it changed since you read it; read it again and retry", w.ID, cur.ResourceVersion, expected)
		}
		if sameRegistration(cur, &w) {
			out = cur
			return nil
		}
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanWebhook(tx.QueryRow(ctx, `UPDATE admission_webhooks SET name = $2, resource_type_name = $3, resource_type_version = $4,
			webhook_url = $5, webhook_type = $6, operations = $7, timeout_seconds = $8, failure_policy = $9, ordering = $10, ca_bundle = $11,
			resource_version = $12, updated_at = $13 WHERE id = $1 RETURNING `+webhookColumns,
			w.ID, w.Name, nullable(w.ResourceTypeName), nullable(w.ResourceTypeVersion), w.URL, w.Type, ops,
			w.TimeoutSeconds, w.FailurePolicy, w.Ordering, nullable(w.CABundle), rev, now))
		return err
	})
	if err != nil {
		return nil, nameTaken(err, w.Name)
	}
	return out, nil
}

func sameRegistration(a, b *webhookconf.Webhook) bool {
	return a.Name == b.Name && a.ResourceTypeName == b.ResourceTypeName && a.ResourceTypeVersion == b.ResourceTypeVersion &&
		a.URL == b.URL && a.Type == b.Type && slices.Equal(a.Operations, b.Operations) && a.TimeoutSeconds == b.TimeoutSeconds &&
		a.FailurePolicy == b.FailurePolicy && a.Ordering == b.Ordering && a.CABundle == b.CABundle
}

// DeleteWebhook removes a webhook.
func (s *Store) DeleteWebhook(ctx context.Context, id int64, dryRun bool) error {
	return s.write(ctx, dryRun, func(tx pgx.Tx) error {
		if err := lockWebhooks(ctx, tx); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM admission_webhooks WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return notFound("admission webhook %d not found", id)
		}
		return nil
	})
}
