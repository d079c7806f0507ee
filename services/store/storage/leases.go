package storage

// Reconcile leases (docs/design/reconcile.md, "Leases"; HARD-PARTS 2): a
// worker acquires a resource's lease before an attempt, with an epoch that
// grows by one at each grant (a fencing token), renews it while it works and
// presents the epoch on every write; a write with a stale epoch is refused.
// Acquiring is refused for items of a deposed scheduler or superseded
// dispatches. Scheduler leadership is one lease whose epoch grows at each
// takeover; the scheduler's writes are fenced by it.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
)

// Lease bounds.
const (
	// DefaultLease is a reconcile lease's length when the worker names none.
	DefaultLease = 30 * time.Second
	// DefaultSchedulerLease is the scheduler lease's length when the
	// scheduler names none.
	DefaultSchedulerLease = 6 * time.Second
	// MaxLease bounds a reconcile or scheduler lease.
	MaxLease = time.Hour
	// MaxHolderBytes bounds a lease holder's name.
	MaxHolderBytes = 253
	// MaxDispatchIDBytes bounds a dispatch id.
	MaxDispatchIDBytes = 128
)

// AcquireLeaseRequest asks for the reconcile lease of a resource.
type AcquireLeaseRequest struct {
	ResourceID int64
	// Holder names the worker replica.
	Holder string
	// Lease is the lease's length (0: DefaultLease).
	Lease time.Duration
	// SchedulerEpoch is the leader epoch that dispatched the item (0: not
	// checked).
	SchedulerEpoch int64
	// DispatchID is the item's dispatch id ("": not checked).
	DispatchID string
	// Actor limits the lease to the resources the calling reconciler
	// identity may take (nil: no limit, identities off).
	Actor *Actor
}

// Actor is the reconciler identity making a worker call, as far as the
// store holds the call to it: leases are held as "<Name>/<replica>", and
// only on resources of Types ("Name/version"). The backends check it on
// the row they lock for the write (Acquire, Complete), so that the check
// costs no read of its own and refuses with ErrNotPermitted, nothing
// written.
type Actor struct {
	Name  string
	Types []string
}

// Permits refuses, with ErrNotPermitted, resource id of type typ
// ("Name/version") when a is not issued for typ, and when its lease holder
// is not one of a's replicas ("": not checked). A nil a permits
// everything.
func (a *Actor) Permits(id int64, typ, holder string) error {
	if a == nil {
		return nil
	}
	if !slices.Contains(a.Types, typ) {
		return NewError(ErrNotPermitted, "reconciler %s is issued for %s, not %s (resource %d)", a.Name, a.types(), typ, id)
	}
	if name, _, _ := strings.Cut(holder, "/"); holder != "" && name != a.Name {
		return NewError(ErrNotPermitted, "reconciler %s acts only as itself: resource %d's lease is held by %q", a.Name, id, holder)
	}
	return nil
}

// types lists a's types, for errors.
func (a *Actor) types() string {
	if len(a.Types) == 0 {
		return "no type"
	}
	return strings.Join(a.Types, ", ")
}

// Lease is a granted reconcile lease.
type Lease struct {
	Epoch     int64
	ExpiresAt time.Time
	// Resource is the resource as the attempt starts: reconciling.
	Resource *resource.Resource
	Policy   resource.ReconcilePolicy
}

// SchedulerLease is the state of the scheduler's leadership lease.
type SchedulerLease struct {
	// Leader is true when the caller holds the lease.
	Leader    bool
	Epoch     int64
	ExpiresAt time.Time
	Holder    string
}

// LeaseState is a resource's reconcile bookkeeping, read by a backend under
// the resource's row lock.
type LeaseState struct {
	Holder             string
	Epoch              int64
	ExpiresAt          *time.Time
	AcquiredAt         *time.Time
	Failures           int32
	TerminalGeneration int64
	RequestedAt        *time.Time
	DispatchID         string
	// Now is the transaction's clock: every time the store compares or
	// writes comes from the database, never from a process's own clock.
	Now time.Time
}

// Held reports whether someone holds an unexpired lease.
func (l *LeaseState) Held() bool {
	return l.Holder != "" && l.ExpiresAt != nil && l.ExpiresAt.After(l.Now)
}

// LeaseError explains why a write presenting epoch found no lease to write
// under.
func LeaseError(id int64, l *LeaseState, epoch int64) error {
	if l.Epoch == epoch {
		return StaleEpoch("the lease of resource %d at epoch %d was already released", id, epoch)
	}
	return StaleEpoch("lease epoch %d of resource %d is stale: the current epoch is %d (held by %q)", epoch, id, l.Epoch, l.Holder)
}

// LeaseDuration checks a requested lease length (0: def).
func LeaseDuration(path string, d, def time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return def, nil
	case d < time.Second || d > MaxLease:
		return 0, InvalidField(path, fmt.Sprintf("must be between 1 and %d seconds", int(MaxLease/time.Second)))
	}
	return d, nil
}

// Validate checks a lease request and returns the lease's length.
func (req AcquireLeaseRequest) Validate() (time.Duration, error) {
	if err := ValidateHolder(req.Holder); err != nil {
		return 0, err
	}
	return LeaseDuration("/lease_seconds", req.Lease, DefaultLease)
}

// ValidateCampaign checks a BecomeScheduler call and returns the lease's
// length (d 0: DefaultSchedulerLease).
func ValidateCampaign(holder string, d time.Duration) (time.Duration, error) {
	if err := ValidateHolder(holder); err != nil {
		return 0, err
	}
	return LeaseDuration("/lease_seconds", d, DefaultSchedulerLease)
}

// ValidateHolder checks a lease holder's name.
func ValidateHolder(holder string) error {
	if holder == "" || len(holder) > MaxHolderBytes {
		return InvalidField("/holder", fmt.Sprintf("holder is required, at most %d bytes", MaxHolderBytes))
	}
	return nil
}

// ValidateDispatchID checks a dispatch id.
func ValidateDispatchID(id string) error {
	if id == "" || len(id) > MaxDispatchIDBytes {
		return InvalidField("/dispatch_id", fmt.Sprintf("dispatch_id is required, at most %d bytes", MaxDispatchIDBytes))
	}
	return nil
}

// MaxDispatches is the most dispatches one RecordDispatches call records.
const MaxDispatches = 1000

// Dispatch is one work item the scheduler dispatched: its resource and
// dispatch id.
type Dispatch struct {
	ResourceID int64
	DispatchID string
}

// ValidateDispatches checks a RecordDispatches request: between one and
// MaxDispatches dispatches, each with a valid dispatch id, each resource
// named once.
func ValidateDispatches(ds []Dispatch) error {
	if len(ds) == 0 || len(ds) > MaxDispatches {
		return InvalidField("/dispatches", fmt.Sprintf("between 1 and %d dispatches", MaxDispatches))
	}
	seen := make(map[int64]bool, len(ds))
	for i, d := range ds {
		if d.DispatchID == "" || len(d.DispatchID) > MaxDispatchIDBytes {
			return InvalidField(fmt.Sprintf("/dispatches/%d/dispatch_id", i), fmt.Sprintf("dispatch_id is required, at most %d bytes", MaxDispatchIDBytes))
		}
		if seen[d.ResourceID] {
			return InvalidField(fmt.Sprintf("/dispatches/%d/resource_id", i), fmt.Sprintf("resource %d is named twice", d.ResourceID))
		}
		seen[d.ResourceID] = true
	}
	return nil
}

// Missing returns the ids of want that are not in got, in want's order.
func Missing(want, got []int64) []int64 {
	in := make(map[int64]bool, len(got))
	for _, id := range got {
		in[id] = true
	}
	var out []int64
	for _, id := range want {
		if !in[id] {
			out = append(out, id)
		}
	}
	return out
}

// RecordDispatch records one dispatch through s.RecordDispatches: NotFound
// when the resource no longer exists.
func RecordDispatch(ctx context.Context, s Store, schedulerEpoch, resourceID int64, dispatchID string) error {
	missing, err := s.RecordDispatches(ctx, schedulerEpoch, []Dispatch{{ResourceID: resourceID, DispatchID: dispatchID}})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return NotFound("resource %d not found", resourceID)
	}
	return nil
}

// Acquire decides a lease request for r, whose lease l was read under the
// row lock, with the scheduler's current epoch and the type's stored
// policy. It refuses items of a deposed scheduler or superseded dispatches
// (ErrStaleDispatch) and leases held by another unexpired holder
// (ErrLeaseHeld). On a grant (epoch + 1, expiring d after l.Now) it marks r
// reconciling and its ReconcilerAvailable condition True, and reports
// whether r's document changed (then the backend emits one MODIFIED event).
// The backend then records the holder, epoch, expiry and acquisition time,
// clears the requeue and consumes a manual trigger requested at or before
// l.Now.
func Acquire(req AcquireLeaseRequest, d time.Duration, r *resource.Resource, l *LeaseState, schedulerEpoch int64, policy []byte) (*Lease, bool, error) {
	if err := req.Actor.Permits(r.ID, r.ResourceTypeName+"/"+r.ResourceTypeVersion, ""); err != nil {
		return nil, false, err
	}
	if req.SchedulerEpoch != 0 && req.SchedulerEpoch < schedulerEpoch {
		return nil, false, NewError(ErrStaleDispatch,
			"work item of scheduler epoch %d is stale: the current scheduler epoch is %d", req.SchedulerEpoch, schedulerEpoch)
	}
	if req.DispatchID != "" && l.DispatchID != "" && req.DispatchID != l.DispatchID {
		return nil, false, NewError(ErrStaleDispatch,
			"work item %s of resource %d was superseded by dispatch %s", req.DispatchID, r.ID, l.DispatchID)
	}
	if l.Held() && l.Holder != req.Holder {
		return nil, false, NewError(ErrLeaseHeld,
			"resource %d is being reconciled by %s until %s", r.ID, l.Holder, l.ExpiresAt.Format(time.RFC3339Nano))
	}
	out := &Lease{Policy: DecodePolicy(policy).WithDefaults(), Epoch: l.Epoch + 1, ExpiresAt: l.Now.Add(d), Resource: r}
	changed := false
	if r.DeletedAt == nil && r.Status != resource.StatusReconciling {
		r.Status = resource.StatusReconciling
		changed = true
	}
	if i := slices.IndexFunc(r.Conditions, isType(resource.ConditionReconcilerAvailable)); i >= 0 && r.Conditions[i].Status != resource.ConditionTrue {
		r.Conditions[i] = resource.Condition{Type: resource.ConditionReconcilerAvailable, Status: resource.ConditionTrue,
			Reason: resource.ReasonReconcilerLive, Message: "a live reconciler took the resource", ObservedGeneration: r.Generation, LastTransitionTime: l.Now}
		changed = true
	}
	if changed {
		r.Phase = resource.PhaseFor(r.Status, r.Phase == resource.PhaseDegraded, r.Conditions)
	}
	return out, changed, nil
}

// SchedulerState is the scheduler lease as a backend read it, under lock.
type SchedulerState struct {
	Epoch     int64
	Holder    string
	ExpiresAt *time.Time
	// Now is the transaction's clock.
	Now time.Time
}

// Campaign decides a BecomeScheduler call against the current lease cur. A
// caller presenting the current epoch as its holder renews it (also after
// expiry, when nobody took over: nobody else can have acted under a newer
// epoch). A caller takes it, with epoch + 1, when it is free, expired, or
// recorded for the caller's own name (a restarted process). Otherwise
// Leader is false and the answer names the current leader. When out.Leader
// is set the backend writes out's epoch, holder and expiry.
func Campaign(cur SchedulerState, holder string, d time.Duration, epoch int64) SchedulerLease {
	out := SchedulerLease{Epoch: cur.Epoch}
	renew := epoch != 0 && epoch == cur.Epoch && cur.Holder == holder
	free := cur.Holder == "" || cur.ExpiresAt == nil || !cur.ExpiresAt.After(cur.Now) || cur.Holder == holder
	if !renew && !free {
		out.Holder, out.ExpiresAt = cur.Holder, cur.ExpiresAt.UTC()
		return out
	}
	if !renew {
		out.Epoch++
	}
	out.Leader, out.Holder, out.ExpiresAt = true, holder, cur.Now.Add(d).UTC()
	return out
}

// CheckScheduler refuses a write fenced by a scheduler epoch that is not
// the current one, or whose lease has expired (valid false).
func CheckScheduler(epoch, current int64, valid bool) error {
	if epoch != current {
		return StaleEpoch("scheduler epoch %d is stale: the current epoch is %d", epoch, current)
	}
	if !valid {
		return StaleEpoch("the lease of scheduler epoch %d has expired; renew it first", epoch)
	}
	return nil
}

func isType(t string) func(resource.Condition) bool {
	return func(c resource.Condition) bool { return c.Type == t }
}
