package sdk

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// Action returns the action plugin called name (the original Operator
// Controller's ctx.get_action_plugin): one of the engine's (Engine.WithActions).
func (r *Request[S]) Action(name string) (action.Plugin, error) {
	return r.actions.Get(name)
}

// RunAction hands the resource's work to the action plugin called name and
// turns its answer into the step's: params (marshalled to JSON) is what the
// plugin applies, in its own shape.
//
// While the resource lives, the plugin's finalizer (its name) is added
// first when the resource does not carry it yet (admission adds it at
// creation), then Apply runs. While it is deleted, Destroy runs, and once it
// succeeded the finalizer is removed with the attempt's result; a resource
// that no longer carries the finalizer (someone removed it) is not
// destroyed, unless forced. The plugin's outputs are set on the request
// whatever happened, and condition ActionSucceeded (action.ConditionSucceeded)
// says how it went; declare it with Engine.WithConditions so that Ready
// waits for it. The
// step's result: done when the plugin's work succeeded; RequeueAfter while
// it runs; the plugin's error (retried with backoff, or Terminal) when it
// failed. A missing plugin, or params that are not JSON, are terminal.
func (r *Request[S]) RunAction(ctx context.Context, name string, params any) (Result, error) {
	p, err := r.Action(name)
	if err != nil {
		return Result{}, Terminal(err)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return Result{}, Terminalf("action %s: params: %w", name, err)
	}
	fin := p.Name()
	deleting := r.Deleting()
	switch {
	case deleting && !r.Resource.HasFinalizer(fin) && !r.Force:
		r.Log.Info("deleting without the action's finalizer: nothing to destroy", "action", name)
		return Result{}, nil
	case !deleting && !r.Resource.HasFinalizer(fin):
		if r.Client == nil {
			return Result{}, fmt.Errorf("add finalizer %s: %w", fin, wire.ErrNoClient)
		}
		if _, err := r.Client.UpdateFinalizers(ctx, r.Resource.ID, []string{fin}, nil); err != nil {
			return Result{}, fmt.Errorf("add finalizer %s before the action runs: %w", fin, err)
		}
		r.Log.Info("finalizer added", "finalizer", fin)
	}
	task := action.Task{
		Resource: action.Resource{UID: r.Resource.UID, Type: r.Resource.Type.String(), Name: r.Resource.Name, Generation: r.Resource.Generation},
		Params:   raw, Outputs: r.Outputs(), Force: r.Force, Epoch: r.LeaseEpoch, Now: r.now(),
		Secrets: r.secrets, Log: r.Log.With("action", name),
	}
	st, err := r.callAction(ctx, p, name, deleting, task)
	for k, v := range st.Outputs {
		if v == nil {
			r.DeleteOutput(k)
		} else {
			r.SetOutput(k, v)
		}
	}
	reason := func(def string) string {
		if st.Reason != "" {
			return st.Reason
		}
		return def
	}
	switch {
	case err != nil:
		r.MarkFalse(action.ConditionSucceeded, reason("Failed"), err.Error())
		if action.IsTerminal(err) {
			return Result{}, Terminal(err)
		}
		return Result{}, err
	case !st.Done:
		r.MarkFalse(action.ConditionSucceeded, reason("Running"), st.Message)
		return RequeueAfter(max(st.RequeueAfter, wire.DefaultRequeueDelay)), nil
	}
	r.MarkTrue(action.ConditionSucceeded, reason("Succeeded"), st.Message)
	if deleting && r.Resource.HasFinalizer(fin) {
		r.removeFinalizers = append(r.removeFinalizers, fin)
	}
	return Result{}, nil
}

// callAction calls p's Destroy (deleting) or Apply, within the attempt's
// StartAction when set.
func (r *Request[S]) callAction(ctx context.Context, p action.Plugin, name string, deleting bool, task action.Task) (action.Status, error) {
	op, call := "apply", p.Apply
	if deleting {
		op, call = "destroy", p.Destroy
	}
	if r.startAction == nil {
		return call(ctx, task)
	}
	ctx, end := r.startAction(ctx, name, op)
	st, err := call(ctx, task)
	end(err)
	return st, err
}
