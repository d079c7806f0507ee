package storage

// The scheduler's view of the store (docs/design/reconcile.md, "Scheduler",
// State): the reconcile state of resources, in pages by id or by ids, read
// in one snapshot with the relay's published revision, from which a new
// leader rebuilds its state.

import (
	"fmt"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
)

// ListReconcileState page bounds.
const (
	DefaultStatePage = 500
	MaxStatePage     = 5000
)

// ReconcileState is what the scheduler needs to know about one resource.
type ReconcileState struct {
	ResourceID            int64
	UID                   string
	Name                  string
	ResourceTypeName      string
	ResourceTypeVersion   string
	Generation            int64
	ObservedGeneration    int64
	Status                string
	Deleting              bool
	Failures              int32
	TerminalGeneration    int64
	LastReconcileTime     *time.Time
	ReconcileRequestedAt  *time.Time
	AnnotationReconcile   bool
	AnnotationIgnore      bool
	LeaseExpiresAt        *time.Time
	DispatchedAt          *time.Time
	RequeueAt             *time.Time
	Policy                resource.ReconcilePolicy
	ResourceVersion       int64
	LeaseEpoch            int64
	LeaseHolder           string
	DispatchID            string
	ReconcilerUnavailable bool
	// CleanupDone: deleting, and no reconciler finalizer remains.
	CleanupDone bool
	// ControllerUID is the uid of the resource's controller owner (its
	// owner reference with controller true), empty when it has none.
	ControllerUID string
	Namespace     string
	// Dependencies are what its last attempt depends on (its completion's).
	Dependencies []Dependency
	// LeaseRevision is the relay's published revision when its lease was
	// last acquired: every change published by then was committed before
	// that attempt began.
	LeaseRevision int64
}

// ListReconcileStateRequest pages through reconcile states by id.
type ListReconcileStateRequest struct {
	AfterID int64
	Limit   int
	// IDs, when set, restricts the page to these resources.
	IDs []int64
}

// ListReconcileStateResult is one page.
type ListReconcileStateResult struct {
	States []ReconcileState
	// ResourceVersion is the relay's published revision at the read.
	ResourceVersion int64
}

// StatePage validates a state request and returns its page size.
func StatePage(req ListReconcileStateRequest) (int, error) {
	limit := req.Limit
	if limit == 0 {
		limit = DefaultStatePage
		if len(req.IDs) > 0 {
			limit = min(len(req.IDs), MaxStatePage)
		}
	}
	if limit < 1 || limit > MaxStatePage {
		return 0, InvalidField("/limit", fmt.Sprintf("must be between 1 and %d", MaxStatePage))
	}
	if len(req.IDs) > MaxStatePage {
		return 0, InvalidField("/resource_ids", fmt.Sprintf("at most %d ids", MaxStatePage))
	}
	return limit, nil
}

// Finish fills in what st's backend read raw: the operation annotation's
// value op, the type's stored policy, and times in UTC.
func (st *ReconcileState) Finish(op string, policy []byte) {
	st.AnnotationReconcile = op == resource.OperationReconcile
	st.AnnotationIgnore = op == resource.OperationIgnore
	st.Policy = DecodePolicy(policy).WithDefaults()
	for _, t := range []**time.Time{&st.LastReconcileTime, &st.ReconcileRequestedAt, &st.LeaseExpiresAt, &st.DispatchedAt, &st.RequeueAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
}

// StateOf is the reconcile state of a resource as a backend that keeps the
// document reads it: r, its lease l, its dispatch and requeue times, its
// type's stored policy. It follows the same rules as a backend that
// computes the flags in SQL.
func StateOf(r *resource.Resource, l *LeaseState, dispatchedAt, requeueAt *time.Time, policy []byte) ReconcileState {
	st := ReconcileState{
		ResourceID: r.ID, UID: r.UID, Name: r.Name, Namespace: r.Namespace, ResourceTypeName: r.ResourceTypeName, ResourceTypeVersion: r.ResourceTypeVersion,
		Generation: r.Generation, ObservedGeneration: r.ObservedGeneration, Status: r.Status, Deleting: r.DeletedAt != nil,
		Failures: l.Failures, TerminalGeneration: l.TerminalGeneration, LastReconcileTime: r.LastReconcileTime,
		ReconcileRequestedAt: l.RequestedAt, LeaseExpiresAt: l.ExpiresAt, DispatchedAt: dispatchedAt, RequeueAt: requeueAt,
		ResourceVersion: r.ResourceVersion, LeaseEpoch: l.Epoch, LeaseHolder: l.Holder, DispatchID: l.DispatchID,
	}
	st.ControllerUID = resource.ControllerUID(r.OwnerReferences)
	for _, c := range r.Conditions {
		if c.Type == resource.ConditionReconcilerAvailable && c.Status != resource.ConditionTrue {
			st.ReconcilerUnavailable = true
		}
	}
	if st.Deleting {
		st.CleanupDone = true
		for _, f := range r.Finalizers {
			if strings.HasPrefix(f, names.ReconcilerFinalizerPrefix) {
				st.CleanupDone = false
			}
		}
	}
	st.Finish(r.Annotations[resource.AnnotationOperation], policy)
	return st
}
