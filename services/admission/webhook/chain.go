package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// DefaultChainTimeout bounds a whole chain, whatever the number of webhooks.
const DefaultChainTimeout = 30 * time.Second

// replyMargin is kept from the caller's deadline so that a chain cut short
// can still answer why.
const replyMargin = 250 * time.Millisecond

// Admission is one write going through the chain.
type Admission struct {
	// Operation is webhookconf.OpCreate, OpUpdate or OpDelete.
	Operation string
	DryRun    bool
	// Resource is the proposed state (CREATE, UPDATE; schema defaults
	// applied) or the current state (DELETE).
	Resource *resource.Resource
	// Old is the current state on UPDATE, nil otherwise.
	Old *resource.Resource
	// User is who asks for the write, nil when no one is named.
	User *User
}

// CheckFunc validates a spec that a mutating webhook patched against the
// type's schema and applies its defaults: it returns the defaulted spec, or
// the violations with their /spec/... paths. err is an internal failure.
type CheckFunc func(spec []byte) (defaulted []byte, violations []problem.FieldError, err error)

// Chain calls webhooks.
type Chain struct {
	// Timeout bounds the whole chain (DefaultChainTimeout when zero).
	Timeout time.Duration
	Log     *slog.Logger
	// Observe, when set, receives every call's webhook, outcome (allowed,
	// denied, error, canceled) and latency: admission's metrics.
	Observe func(webhook, outcome string, d time.Duration)
}

// Run takes a through the matched webhooks: the mutating ones in order,
// each seeing the previous one's result, with check run after each one that
// patched, then the validating ones in order, stopping at the first denial.
// It returns the admitted resource: a's resource with the patched spec,
// labels and annotations.
//
// Errors: a denial is Forbidden (CodeDenied) naming the webhook and
// carrying its message; a failed webhook whose policy is Fail is
// Unavailable (CodeWebhookFailed) naming it (with policy Ignore the chain
// goes on as if it had not been called); a patch that makes the resource
// invalid is Invalid (CodeValidation) naming the webhook and the fields.
func (c *Chain) Run(ctx context.Context, hooks Matched, a Admission, check CheckFunc) (*resource.Resource, error) {
	if hooks.Empty() {
		return a.Resource, nil
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultChainTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Add(-replyMargin).Before(deadline) && time.Until(d) > 2*replyMargin {
		deadline = d.Add(-replyMargin)
	}
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	cur := *a.Resource
	cur.Normalize()
	old := json.RawMessage("null")
	if a.Old != nil {
		o := *a.Old
		o.Normalize()
		b, err := resource.Marshal(&o)
		if err != nil {
			return nil, fmt.Errorf("encode old resource: %w", err)
		}
		old = b
	}
	uid := uuid.NewString()
	doc, err := resource.Marshal(&cur)
	if err != nil {
		return nil, fmt.Errorf("encode resource: %w", err)
	}

	for _, h := range hooks.Mutating {
		resp, err := c.call(ctx, cctx, h, Request{UID: uid, Operation: a.Operation, DryRun: a.DryRun, User: a.User, Resource: doc, OldResource: old})
		if err != nil {
			if c.ignored(h, err) {
				continue
			}
			return nil, err
		}
		if !resp.Allowed {
			return nil, denied(h, resp.Message)
		}
		if resp.Patch == nil {
			continue
		}
		patched, err := ApplyPatch(doc, resp.Patch)
		if err != nil {
			if err = failed(h, err); c.ignored(h, err) {
				continue
			}
			return nil, err
		}
		next, err := c.take(h, &cur, patched, check)
		if err != nil {
			if c.ignored(h, err) {
				continue
			}
			return nil, err
		}
		cur = *next
		if doc, err = resource.Marshal(&cur); err != nil {
			return nil, fmt.Errorf("encode resource: %w", err)
		}
	}
	for _, h := range hooks.Validating {
		resp, err := c.call(ctx, cctx, h, Request{UID: uid, Operation: a.Operation, DryRun: a.DryRun, User: a.User, Resource: doc, OldResource: old})
		if err != nil {
			if c.ignored(h, err) {
				continue
			}
			return nil, err
		}
		if !resp.Allowed {
			return nil, denied(h, resp.Message)
		}
	}
	return &cur, nil
}

// call calls one webhook. A canceled request is returned as is; any other
// error is the webhook's failure.
func (c *Chain) call(ctx, cctx context.Context, h *Hook, req Request) (*Response, error) {
	body, err := resource.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode admission request: %w", err)
	}
	start := time.Now()
	resp, err := h.call(cctx, body)
	if c.Observe != nil {
		outcome := "allowed"
		switch {
		case err != nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
			outcome = "canceled"
		case err != nil:
			outcome = "error"
		case !resp.Allowed:
			outcome = "denied"
		}
		c.Observe(h.Name, outcome, time.Since(start))
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		if c.Log != nil {
			attrs := []any{"webhook", h.Name, "url", h.URL, "error", err.Error()}
			var ce *callError
			if errors.As(err, &ce) && ce.cause != nil {
				attrs = append(attrs, "cause", ce.cause.Error())
			}
			c.Log.Warn("admission webhook call failed", attrs...)
		}
		return nil, failed(h, err)
	}
	return resp, nil
}

// take reads the patched document's spec, labels and annotations into a
// copy of cur, checking the spec against the schema and the metadata rules.
func (c *Chain) take(h *Hook, cur *resource.Resource, patched []byte, check CheckFunc) (*resource.Resource, error) {
	var p struct {
		Spec        json.RawMessage `json:"spec"`
		Labels      json.RawMessage `json:"labels"`
		Annotations json.RawMessage `json:"annotations"`
	}
	if err := json.Unmarshal(patched, &p); err != nil {
		return nil, failed(h, fmt.Errorf("the patched resource does not decode: %v", err))
	}
	var errs []problem.FieldError
	next := *cur
	labels, lerrs := stringMap("/labels", p.Labels)
	annotations, aerrs := stringMap("/annotations", p.Annotations)
	errs = append(append(errs, lerrs...), aerrs...)
	if len(errs) == 0 {
		errs = resource.ValidateMetadata(labels, annotations, nil)
	}
	next.Labels, next.Annotations = labels, annotations
	if t := firstByte(p.Spec); t != '{' {
		errs = append(errs, problem.FieldError{Path: "/spec", Message: "must be a JSON object"})
	} else {
		spec, violations, err := check(p.Spec)
		if err != nil {
			return nil, err
		}
		errs = append(errs, violations...)
		if len(spec) > names.MaxSpecBytes {
			errs = append(errs, problem.FieldError{Path: "/spec", Message: fmt.Sprintf("%d bytes with defaults, more than the %d allowed", len(spec), names.MaxSpecBytes)})
		}
		next.Spec = spec
	}
	if len(errs) > 0 {
		return nil, problem.New(problem.Invalid, problem.CodeValidation,
			"the patch of admission webhook %q makes the resource invalid", h.Name).WithFields(errs...)
	}
	return &next, nil
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return c
		}
	}
	return 0
}

// stringMap decodes patched labels or annotations: absent or null is empty.
func stringMap(path string, raw json.RawMessage) (map[string]string, []problem.FieldError) {
	out := map[string]string{}
	if t := firstByte(raw); t == 0 || t == 'n' {
		return out, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return out, []problem.FieldError{{Path: path, Message: "must be an object of strings"}}
	}
	var errs []problem.FieldError
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err != nil || firstByte(v) != '"' {
			errs = append(errs, problem.FieldError{Path: path + "/" + resource.EscapePointer(k), Message: "must be a string"})
			continue
		}
		out[k] = s
	}
	return out, errs
}

// ignored reports whether err, a failure of h, is to be ignored, and logs
// it when it is.
func (c *Chain) ignored(h *Hook, err error) bool {
	pe := problem.As(err)
	if pe == nil || pe.Code != problem.CodeWebhookFailed || h.FailurePolicy != webhookconf.PolicyIgnore {
		return false
	}
	if c.Log != nil {
		c.Log.Warn("admission webhook failed; ignored by its failure policy", "webhook", h.Name, "error", pe.Detail)
	}
	return true
}

func failed(h *Hook, err error) error {
	return problem.New(problem.Unavailable, problem.CodeWebhookFailed, "admission webhook %q failed: %v", h.Name, err)
}

func denied(h *Hook, message string) error {
	if message == "" {
		return problem.New(problem.Forbidden, problem.CodeDenied, "admission webhook %q denied the request", h.Name)
	}
	return problem.New(problem.Forbidden, problem.CodeDenied, "admission webhook %q denied the request: %s", h.Name, message)
}
