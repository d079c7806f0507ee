package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
	"github.com/no8s/no8s/libs/sdk/worker"
)

// Attempted is what one in-memory attempt (Reconcile) ended with and would
// have saved.
type Attempted struct {
	// Outcome is how the attempt ended (success, requeue, error, terminal).
	Outcome lifecycle.Outcome
	// RequeueAfter is set for a requeue.
	RequeueAfter time.Duration
	// Err is the error of a failed attempt.
	Err error
	// Skipped is true when the resource carries no8s.io/operation: ignore.
	Skipped bool
	// Phase, Message, Conditions and Outputs (nil: unchanged) are the
	// status the engine would save.
	Phase      string
	Message    string
	Conditions []conditions.Condition
	Outputs    json.RawMessage
	// AddFinalizers and RemoveFinalizers change the resource's finalizers
	// with the result; Events are recorded with it.
	AddFinalizers    []string
	RemoveFinalizers []string
	Events           []sdk.Event
}

// Reconcile runs one attempt of rec on res in memory, with no control
// plane, and returns what it would have saved: a unit test of a whole
// reconciler (its steps, conditions, Ready and phase), beside the
// end-to-end tests on Start's control plane. The resource's store
// connection finds no other resource (sdk.ErrNotFound) and accepts the
// reconciler's finalizer changes.
func Reconcile(ctx context.Context, rec worker.Reconciler, res *sdk.Resource) Attempted {
	mem := &memory{res: res.Clone()}
	rep := rec.Reconcile(ctx, &wire.Attempt{ID: "testkit", Resource: res.Clone(), Client: mem})
	a := Attempted{Outcome: rep.Outcome, RequeueAfter: rep.RequeueAfter, Err: rep.Err, Skipped: rep.Skipped}
	if c := rep.Completion; c != nil {
		a.Phase, a.Message, a.Conditions, a.Outputs = c.Phase, c.Message, c.Conditions, c.Outputs
		a.AddFinalizers, a.RemoveFinalizers, a.Events = c.AddFinalizers, c.RemoveFinalizers, c.Events
	}
	return a
}

// memory is Reconcile's store connection: the resource under reconcile
// only.
type memory struct{ res *sdk.Resource }

func (m *memory) Get(_ context.Context, id int64) (*sdk.Resource, error) {
	if id == m.res.ID {
		return m.res.Clone(), nil
	}
	return nil, fmt.Errorf("resource %d: %w", id, sdk.ErrNotFound)
}

func (m *memory) GetByName(_ context.Context, t sdk.TypeRef, namespace, name string) (*sdk.Resource, error) {
	if t == m.res.Type && namespace == m.res.Namespace && name == m.res.Name {
		return m.res.Clone(), nil
	}
	return nil, fmt.Errorf("%s %s/%s: %w", t, namespace, name, sdk.ErrNotFound)
}

func (m *memory) List(_ context.Context, opts sdk.ListOptions) (*wire.ResourceList, error) {
	if (opts.Namespace != "" && opts.Namespace != m.res.Namespace) || (opts.Type.Name != "" && opts.Type.Name != m.res.Type.Name) {
		return &wire.ResourceList{}, nil
	}
	return &wire.ResourceList{Items: []*sdk.Resource{m.res.Clone()}}, nil
}

func (m *memory) UpdateFinalizers(_ context.Context, id int64, add, remove []string) (*sdk.Resource, error) {
	if id != m.res.ID {
		return nil, fmt.Errorf("resource %d: %w", id, sdk.ErrNotFound)
	}
	for _, f := range add {
		if !slices.Contains(m.res.Finalizers, f) {
			m.res.Finalizers = append(m.res.Finalizers, f)
		}
	}
	m.res.Finalizers = slices.DeleteFunc(m.res.Finalizers, func(f string) bool { return slices.Contains(remove, f) })
	return m.res.Clone(), nil
}

func (m *memory) Status() wire.StatusWriter { return m }

func (m *memory) Complete(_ context.Context, c *wire.Completion) (*wire.Completed, error) {
	return &wire.Completed{Resource: m.res.Clone()}, nil
}
