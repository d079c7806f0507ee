package scheduler

import (
	"time"
	"unique"

	"google.golang.org/protobuf/types/known/timestamppb"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// stateFromProto maps the store's ReconcileState onto the scheduler's own.
func stateFromProto(p *reconcilev1.ReconcileState) trigger.State {
	pol := p.GetPolicy()
	st := trigger.State{
		ID:                    p.GetResourceId(),
		UID:                   p.GetResourceUid(),
		Name:                  p.GetName(),
		TypeName:              canon(p.GetResourceTypeName()),
		TypeVersion:           canon(p.GetResourceTypeVersion()),
		Generation:            p.GetGeneration(),
		ObservedGeneration:    p.GetObservedGeneration(),
		Status:                canon(p.GetStatus()),
		Deleting:              p.GetDeleting(),
		CleanupDone:           p.GetCleanupDone(),
		Failures:              int(p.GetFailures()),
		TerminalGeneration:    p.GetTerminalGeneration(),
		LastReconcile:         asTime(p.GetLastReconcileTime()),
		RequestedAt:           asTime(p.GetReconcileRequestedAt()),
		AnnotationReconcile:   p.GetAnnotationReconcile(),
		AnnotationIgnore:      p.GetAnnotationIgnore(),
		LeaseExpiresAt:        asTime(p.GetLeaseExpiresAt()),
		LeaseHolder:           canon(p.GetLeaseHolder()),
		LeaseEpoch:            p.GetLeaseEpoch(),
		RequeueAt:             asTime(p.GetRequeueAt()),
		ReconcilerUnavailable: p.GetReconcilerUnavailable(),
		ControllerUID:         p.GetControllerUid(),
		Policy: trigger.Policy{
			Resync:      seconds(pol.GetResyncSeconds(), resource.DefaultResyncSeconds),
			BackoffBase: seconds(pol.GetBackoffBaseSeconds(), resource.DefaultBackoffBaseSeconds),
			BackoffMax:  seconds(pol.GetBackoffMaxSeconds(), resource.DefaultBackoffMaxSeconds),
		},
		Namespace:       canon(p.GetNamespace()),
		ResourceVersion: p.GetResourceVersion(),
		LeaseRevision:   p.GetLeaseRevision(),
	}
	for _, d := range p.GetDependencies() {
		st.Dependencies = append(st.Dependencies, trigger.Ref{TypeName: canon(d.GetTypeName()), TypeVersion: canon(d.GetTypeVersion()),
			Namespace: canon(d.GetNamespace()), Name: d.GetName()})
		st.Waiting = st.Waiting || d.GetWait()
	}
	return st
}

// canon is s as one shared copy: the scheduler keeps a state per resource,
// and most of their strings (type, version, namespace, status, lease
// holder) have few values. unique drops a copy once nothing refers to it.
func canon(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

func seconds(n, def int32) time.Duration {
	if n <= 0 {
		n = def
	}
	return time.Duration(n) * time.Second
}

func asTime(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}
