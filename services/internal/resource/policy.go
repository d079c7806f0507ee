package resource

import (
	"fmt"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/internal/problem"
)

// Reconcile policy defaults: the public API's (libs/client).
const (
	DefaultResyncSeconds      = client.DefaultResyncSeconds
	DefaultBackoffBaseSeconds = client.DefaultBackoffBaseSeconds
	DefaultBackoffMaxSeconds  = client.DefaultBackoffMaxSeconds
	DefaultTimeoutSeconds     = client.DefaultTimeoutSeconds
	// MaxTimeoutSeconds bounds a reconcile's timeout.
	MaxTimeoutSeconds = client.MaxTimeoutSeconds
)

// ReconcilePolicy tunes scheduling for the resources of a type. A zero field
// means its default (WithDefaults); documents read from the store always
// carry every field.
type ReconcilePolicy = client.ReconcilePolicy

// ValidatePolicy checks a policy as written (zero fields take defaults): no
// negative values, backoff_max_seconds at least backoff_base_seconds, and a
// timeout of at most MaxTimeoutSeconds. path prefixes the field paths.
func ValidatePolicy(p ReconcilePolicy, path string) []problem.FieldError {
	var errs []problem.FieldError
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"resync_seconds", p.ResyncSeconds},
		{"backoff_base_seconds", p.BackoffBaseSeconds},
		{"backoff_max_seconds", p.BackoffMaxSeconds},
		{"timeout_seconds", p.TimeoutSeconds},
	} {
		if f.v < 0 {
			errs = append(errs, problem.FieldError{Path: path + "/" + f.name, Message: "must be a positive integer"})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	d := p.WithDefaults()
	if d.BackoffMaxSeconds < d.BackoffBaseSeconds {
		errs = append(errs, problem.FieldError{Path: path + "/backoff_max_seconds",
			Message: fmt.Sprintf("must be at least backoff_base_seconds (%d)", d.BackoffBaseSeconds)})
	}
	if d.TimeoutSeconds > MaxTimeoutSeconds {
		errs = append(errs, problem.FieldError{Path: path + "/timeout_seconds", Message: fmt.Sprintf("must be between 1 and %d", MaxTimeoutSeconds)})
	}
	return errs
}

// Operation annotations (libs/api/names holds them).
const (
	// AnnotationOperation asks for an operation on a resource.
	AnnotationOperation = names.OperationAnnotation
	// OperationReconcile triggers one reconcile that skips every "nothing to
	// do" shortcut; the reconciler removes the annotation afterwards.
	OperationReconcile = names.OperationReconcile
	// OperationIgnore pauses reconciliation of the resource.
	OperationIgnore = names.OperationIgnore
)

// Condition statuses.
const (
	ConditionTrue    = string(lifecycle.True)
	ConditionFalse   = string(lifecycle.False)
	ConditionUnknown = string(lifecycle.Unknown)
)

// ConditionReconcilerAvailable says whether a live reconciler serves the
// resource's type. The scheduler sets it False when none does; the store sets
// it True again when a worker acquires the resource.
const ConditionReconcilerAvailable = "ReconcilerAvailable"

// Reasons of condition ReconcilerAvailable, and of the scheduler's Events.
const (
	// ReasonNoLiveReconciler: no live reconciler serves the type (set by
	// the scheduler while nothing waits for one).
	ReasonNoLiveReconciler = "NoLiveReconciler"
	// ReasonReconcilerLive: a live reconciler serves the type again, or a
	// worker took the resource.
	ReasonReconcilerLive = "ReconcilerLive"
	// ReasonReconcilerNotResponding: work for the resource has waited
	// longer than the scheduler's item lease (--item-lease, 30 s by
	// default) without a worker leasing it or any work of its type,
	// whether dispatched to a registered reconciler that does not take
	// work or waiting for a type
	// whose reconciler disappeared. The scheduler sets the condition and
	// records a Warning Event of this reason, naming the reconciler, its
	// replicas and their last heartbeat.
	ReasonReconcilerNotResponding = "ReconcilerNotResponding"
)
