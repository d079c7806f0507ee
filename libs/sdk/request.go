package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// Request is one reconcile of one resource: a new Request is made for every
// attempt and shared by its steps. S is the spec's Go type (decoded from the
// resource's spec; use json.RawMessage or map[string]any to decode it
// yourself).
type Request[S any] struct {
	// ID identifies the attempt in logs (the work item's dispatch id).
	ID string
	// Resource is the fresh resource as loaded for this attempt. Record
	// results with SetCondition and SetOutput, not by changing it.
	Resource *Resource
	// Spec is Resource.Spec decoded.
	Spec S
	// Force is true when the resource carries no8s.io/operation: reconcile:
	// every "nothing to do" shortcut must be skipped and the work done.
	Force bool
	// Reason is why the attempt was dispatched (generation, deletion,
	// manual, annotation, resync, retry, pending).
	Reason string
	// LeaseEpoch is the epoch of the attempt's reconcile lease (zero outside
	// the worker runtime): it grows by one with every attempt on the
	// resource.
	LeaseEpoch int64
	// Log carries the reconcile id and the resource's identity.
	Log *slog.Logger
	// Client is the store connection: it reads other resources and changes
	// the reconciler's own finalizers.
	Client Client
	// Scratch is shared by the steps of this attempt: an earlier step
	// leaves what a later one needs (a connection, a computed name). Read
	// it with Lookup.
	Scratch map[string]any
	// Changes counts what the attempt created, updated and deleted outside
	// the control plane; it is saved in the history row.
	Changes wire.Changes

	secrets secret.Resolver
	actions *action.Registry
	api     *client.Client
	// startStep and startAction are the attempt's (wire.Attempt's
	// StartStep, StartAction).
	startStep   func(ctx context.Context, step, stage string) (context.Context, func(error))
	startAction func(ctx context.Context, plugin, operation string) (context.Context, func(error))
	// removeFinalizers are saved with the result (RunAction's, once its
	// plugin's Destroy succeeded).
	removeFinalizers []string
	// waits are what WaitFor was called for.
	waits          []wire.Dependency
	events         []Event
	conds          []conditions.Condition
	outputs        map[string]any
	outputsChanged bool
	now            func() time.Time
}

// NewRequest builds the Request the engine would build for res (spec
// decoded, conditions and outputs loaded, Force from the annotation), for
// unit tests of single steps. Client is nil unless set; Secrets resolve from
// the environment and files unless WithSecrets is used. A spec that does not
// decode is a terminal error.
func NewRequest[S any](res *Resource) (*Request[S], error) {
	req := newRequest[S](res, time.Now)
	if err := res.DecodeSpec(&req.Spec); err != nil {
		return req, Terminal(err)
	}
	return req, nil
}

func newRequest[S any](res *Resource, now func() time.Time) *Request[S] {
	return &Request[S]{
		Resource: res, Force: res.Operation() == names.OperationReconcile,
		Log: slog.New(slog.DiscardHandler), Scratch: map[string]any{},
		conds: conditions.Normalize(res.Conditions), outputs: decodeOutputs(res.Outputs), now: now,
	}
}

// WithActions sets the action plugins Action and RunAction use (for tests of
// single steps; the engine's WithActions sets them for every attempt).
func (r *Request[S]) WithActions(reg *action.Registry) *Request[S] {
	r.actions = reg
	return r
}

// WithAPI sets the client API returns (for tests of single steps).
func (r *Request[S]) WithAPI(c *client.Client) *Request[S] {
	r.api = c
	return r
}

// API is the client of the control plane's REST API (libs/client) for the
// resources the reconciler manages beside the one under reconcile: its
// children are created, changed and deleted through it, as any client's
// writes, so that admission applies (give them an owner reference to the
// resource under reconcile, and they go when it goes). It is not the store
// connection (Client), which reads and changes only the reconciler's own
// finalizers.
//
// The worker configures it from NO8S_API_URL (default
// http://127.0.0.1:8000) and authenticates it as the reconciler: with
// NO8S_IDENTITY_DIR and an https URL (the gateway's service listener) it
// presents the reconciler's certificate, else it sends NO8S_TOKEN when set.
// The test kit's workers get one likewise. Nil when the runtime gave none
// (a Request from NewRequest without WithAPI).
func (r *Request[S]) API() *client.Client { return r.api }

// WithSecrets sets the resolver Secret uses (for tests of single steps).
func (r *Request[S]) WithSecrets(res secret.Resolver) *Request[S] {
	r.secrets = res
	return r
}

// Deleting reports whether the resource is being deleted (Cleanup runs).
func (r *Request[S]) Deleting() bool { return r.Resource.Deleting() }

// Namespace is the namespace of the resource under reconcile. Resources it
// reads or manages by name (its children) live in the same namespace:
// owner references never cross namespaces.
func (r *Request[S]) Namespace() string { return r.Resource.Namespace }

// Generation is the generation this attempt reconciles.
func (r *Request[S]) Generation() int64 { return r.Resource.Generation }

// SetCondition records a condition for this generation. Its transition time
// moves only when its status changes.
func (r *Request[S]) SetCondition(typ string, status conditions.Status, reason, message string) {
	r.conds = conditions.Set(r.conds, conditions.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: r.Resource.Generation,
	}, r.now())
}

// MarkTrue sets condition typ to True.
func (r *Request[S]) MarkTrue(typ, reason, message string) {
	r.SetCondition(typ, conditions.True, reason, message)
}

// MarkFalse sets condition typ to False.
func (r *Request[S]) MarkFalse(typ, reason, message string) {
	r.SetCondition(typ, conditions.False, reason, message)
}

// Condition returns the current condition of type typ (as loaded or as set
// in this attempt).
func (r *Request[S]) Condition(typ string) (conditions.Condition, bool) {
	return conditions.Find(r.conds, typ)
}

// Conditions returns a copy of the current conditions.
func (r *Request[S]) Conditions() []conditions.Condition {
	out := make([]conditions.Condition, len(r.conds))
	copy(out, r.conds)
	return out
}

// SetOutput sets one key of the resource's outputs (a JSON object others
// read through GET .../outputs). Never put a secret in an output.
func (r *Request[S]) SetOutput(key string, value any) {
	r.outputs[key] = value
	r.outputsChanged = true
}

// DeleteOutput removes one key of the outputs.
func (r *Request[S]) DeleteOutput(key string) {
	if _, ok := r.outputs[key]; ok {
		delete(r.outputs, key)
		r.outputsChanged = true
	}
}

// Outputs returns a copy of the current outputs.
func (r *Request[S]) Outputs() map[string]any { return maps.Clone(r.outputs) }

// Secret resolves a secret reference from the spec ({"env": "NAME"} or
// {"file": "/path"}) with the worker's resolver. The error names the
// reference, never the value.
func (r *Request[S]) Secret(ctx context.Context, ref secret.Ref) (secret.Value, error) {
	res := r.secrets
	if res == nil {
		res = secret.Local{}
	}
	return res.Resolve(ctx, ref)
}

// Event records an Event (the Kubernetes kind) on the resource: typ is
// names.EventNormal or names.EventWarning (libs/api), reason a CamelCase word (BackupFailed),
// message what happened (cut to names.MaxEventMessageBytes). Events are
// saved with the attempt's result through the workers' door, in the same
// store transaction; a repeat of (type, reason, message) within the store's
// dedup window raises the count of one record instead of adding one. At
// most 32 per attempt are kept (the first ones).
func (r *Request[S]) Event(typ, reason, message string) {
	if len(r.events) >= wire.MaxEvents {
		return
	}
	r.events = append(r.events, Event{Type: typ, Reason: reason, Message: names.TruncateEventMessage(message)})
}

// Eventf is Event with a formatted message.
func (r *Request[S]) Eventf(typ, reason, format string, args ...any) {
	r.Event(typ, reason, fmt.Sprintf(format, args...))
}

// Events returns the events recorded so far in this attempt.
func (r *Request[S]) Events() []Event { return append([]Event(nil), r.events...) }

// Now is the engine's clock.
func (r *Request[S]) Now() time.Time { return r.now() }

// Lookup returns the scratch value under key as a T.
func Lookup[T any, S any](r *Request[S], key string) (T, bool) {
	v, ok := r.Scratch[key].(T)
	return v, ok
}

func decodeOutputs(raw json.RawMessage) map[string]any {
	m := map[string]any{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &m)
		if m == nil {
			m = map[string]any{}
		}
	}
	return m
}
