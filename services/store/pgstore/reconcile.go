package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// This file holds the store's side of reconciliation (docs/design/reconcile.md):
// per-resource reconcile leases fenced by an epoch, the scheduler's
// leadership lease, dispatch records, the one-transaction completion of an
// attempt and the history it leaves.

// Reconcile defaults and bounds.
const (
	// DefaultHistoryLimit is how many history rows a resource keeps.
	DefaultHistoryLimit = 100
	// DefaultLease is a reconcile lease's length when the worker names none.
	DefaultLease = 30 * time.Second
	// MaxLease bounds a reconcile or scheduler lease.
	MaxLease = time.Hour
	// DefaultHistoryPage and MaxHistoryPage bound a history page.
	DefaultHistoryPage = 50
	MaxHistoryPage     = 500
	// DefaultStatePage and MaxStatePage bound a ListReconcileState page.
	DefaultStatePage = 500
	MaxStatePage     = 5000
	// MaxHolderBytes bounds a lease holder's name.
	MaxHolderBytes = 253
)

// WithHistoryLimit bounds the reconciliation history kept per resource
// (n <= 0: DefaultHistoryLimit). The oldest rows are pruned by the
// transaction that adds a row.
func WithHistoryLimit(n int) Option { return func(s *Store) { s.historyLimit = n } }

func (s *Store) maxHistory() int {
	if s.historyLimit <= 0 {
		return DefaultHistoryLimit
	}
	return s.historyLimit
}

// reconcileColumns are the bookkeeping columns read beside resourceColumns.
const reconcileColumns = `lease_holder, lease_epoch, lease_expires_at, lease_acquired_at, failures, terminal_generation,
	reconcile_requested_at, dispatch_id, now()`

// leaseRow is a resource's reconcile bookkeeping, read under its row lock.
type leaseRow struct {
	holder             string
	epoch              int64
	expiresAt          *time.Time
	acquiredAt         *time.Time
	failures           int32
	terminalGeneration int64
	requestedAt        *time.Time
	dispatchID         string
	// now is the transaction's clock: every time the store compares or
	// writes comes from PostgreSQL, never from a process's own clock.
	now time.Time
}

// held reports whether someone holds an unexpired lease.
func (l *leaseRow) held() bool {
	return l.holder != "" && l.expiresAt != nil && l.expiresAt.After(l.now)
}

// extraRow scans a resource row followed by more columns.
type extraRow struct {
	pgx.Row
	extra []any
}

func (r extraRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// lockReconcileSQL reads a resource and its lease for update.
const lockReconcileSQL = `SELECT ` + resourceColumns + `, ` + reconcileColumns + ` FROM resources WHERE id = $1 FOR UPDATE`

// scanReconcile scans a row of lockReconcileSQL.
func scanReconcile(row pgx.Row, id int64) (*resource.Resource, *leaseRow, error) {
	var l leaseRow
	r, err := scanResource(extraRow{Row: row, extra: []any{&l.holder, &l.epoch, &l.expiresAt, &l.acquiredAt, &l.failures,
		&l.terminalGeneration, &l.requestedAt, &l.dispatchID, &l.now}})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, problem.NotFoundf("resource %d not found", id)
	}
	if err != nil {
		return nil, nil, err
	}
	l.now = l.now.UTC()
	return r, &l, nil
}

// lockForReconcile reads a resource and its lease for update.
func lockForReconcile(ctx context.Context, tx pgx.Tx, id int64) (*resource.Resource, *leaseRow, error) {
	return scanReconcile(tx.QueryRow(ctx, lockReconcileSQL, id), id)
}

// leaseError explains why a write presenting epoch found no lease to write
// under.
func leaseError(id int64, l *leaseRow, epoch int64) error {
	if l.epoch == epoch {
		return staleEpoch("the lease of resource %d at epoch %d was already released", id, epoch)
	}
	return staleEpoch("lease epoch %d of resource %d is stale: the current epoch is %d (held by %q)", epoch, id, l.epoch, l.holder)
}

func staleEpoch(format string, args ...any) error {
	return problem.New(problem.Conflict, problem.CodeStaleEpoch, format, args...)
}

func leaseDuration(path string, d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return DefaultLease, nil
	case d < time.Second || d > MaxLease:
		return 0, problem.Field(path, fmt.Sprintf("must be between 1 and %d seconds", int(MaxLease/time.Second)))
	}
	return d, nil
}

func validateHolder(holder string) error {
	if holder == "" || len(holder) > MaxHolderBytes {
		return problem.Field("/holder", fmt.Sprintf("holder is required, at most %d bytes", MaxHolderBytes))
	}
	return nil
}

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
}

// Lease is a granted reconcile lease.
type Lease struct {
	Epoch     int64
	ExpiresAt time.Time
	// Resource is the resource as the attempt starts: reconciling.
	Resource *resource.Resource
	Policy   resource.ReconcilePolicy
}

// AcquireLease grants the reconcile lease of a resource: epoch + 1, the
// resource marked reconciling (a MODIFIED event when that changes its
// document). It is refused with lease_held while another holder's lease is
// unexpired, and with stale_dispatch when the item comes from a deposed
// scheduler or was superseded by a newer dispatch. It consumes a pending
// manual trigger and requeue, and turns a ReconcilerAvailable condition back
// to True.
func (s *Store) AcquireLease(ctx context.Context, req AcquireLeaseRequest) (*Lease, error) {
	if err := validateHolder(req.Holder); err != nil {
		return nil, err
	}
	lease, err := leaseDuration("/lease_seconds", req.Lease)
	if err != nil {
		return nil, err
	}
	var (
		out        Lease
		r          *resource.Resource
		l          *leaseRow
		schedEpoch int64
		policy     []byte
		rv         *revisions
	)
	// Two round trips: the reads (and a revision, used only when the
	// document changes), then the writes with COMMIT.
	err = s.pipelinedWrite(ctx, false, func(b *pgx.Batch) {
		b.Queue(`SELECT epoch FROM scheduler_state WHERE id = 1`)
		b.Queue(lockReconcileSQL, req.ResourceID)
		b.Queue(`SELECT t.reconcile_policy FROM resources r JOIN resource_types t ON t.id = r.resource_type_id WHERE r.id = $1`, req.ResourceID)
		queueRevisions(b, 1)
	}, func(br pgx.BatchResults) error {
		if err := br.QueryRow().Scan(&schedEpoch); err != nil {
			return err
		}
		var err error
		if r, l, err = scanReconcile(br.QueryRow(), req.ResourceID); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&policy); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rv, err = scanRevisions(br, 1)
		return err
	}, func(b *pgx.Batch) error {
		if req.SchedulerEpoch != 0 && req.SchedulerEpoch < schedEpoch {
			return problem.New(problem.FailedPrecondition, problem.CodeStaleDispatch,
				"work item of scheduler epoch %d is stale: the current scheduler epoch is %d", req.SchedulerEpoch, schedEpoch)
		}
		if req.DispatchID != "" && l.dispatchID != "" && req.DispatchID != l.dispatchID {
			return problem.New(problem.FailedPrecondition, problem.CodeStaleDispatch,
				"work item %s of resource %d was superseded by dispatch %s", req.DispatchID, r.ID, l.dispatchID)
		}
		if l.held() && l.holder != req.Holder {
			return problem.New(problem.Conflict, problem.CodeLeaseHeld,
				"resource %d is being reconciled by %s until %s", r.ID, l.holder, l.expiresAt.Format(time.RFC3339Nano))
		}
		out.Policy = decodePolicy(policy).WithDefaults()
		out.Epoch, out.ExpiresAt = l.epoch+1, l.now.Add(lease)

		changed := false
		if r.DeletedAt == nil && r.Status != resource.StatusReconciling {
			r.Status = resource.StatusReconciling
			changed = true
		}
		if i := slices.IndexFunc(r.Conditions, isType(resource.ConditionReconcilerAvailable)); i >= 0 && r.Conditions[i].Status != resource.ConditionTrue {
			r.Conditions[i] = resource.Condition{Type: resource.ConditionReconcilerAvailable, Status: resource.ConditionTrue,
				Reason: "ReconcilerLive", Message: "a live reconciler took the resource", ObservedGeneration: r.Generation, LastTransitionTime: l.now}
			changed = true
		}
		if changed {
			r.Phase = resource.PhaseFor(r.Status, r.Phase == resource.PhaseDegraded, r.Conditions)
			err := rv.emit(b, change{event: eventstream.Modified, r: r, write: func(b *pgx.Batch) {
				b.Queue(`UPDATE resources SET status = $2, phase = $3, conditions = $4, resource_version = $5, updated_at = $6 WHERE id = $1`,
					r.ID, r.Status, r.Phase, r.Conditions, r.ResourceVersion, r.UpdatedAt)
			}})
			if err != nil {
				return err
			}
		}
		b.Queue(`UPDATE resources SET lease_holder = $2, lease_epoch = $3, lease_expires_at = $4, lease_acquired_at = $5, requeue_at = NULL,
			reconcile_requested_at = CASE WHEN reconcile_requested_at <= $5 THEN NULL ELSE reconcile_requested_at END
			WHERE id = $1`, r.ID, req.Holder, out.Epoch, out.ExpiresAt, l.now)
		out.Resource = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func isType(t string) func(resource.Condition) bool {
	return func(c resource.Condition) bool { return c.Type == t }
}

// RenewLease extends a held lease and returns its new expiry. It is refused
// with stale_epoch once the lease was released or another holder took a
// newer epoch.
func (s *Store) RenewLease(ctx context.Context, resourceID, epoch int64, d time.Duration) (time.Time, error) {
	lease, err := leaseDuration("/lease_seconds", d)
	if err != nil {
		return time.Time{}, err
	}
	var expires time.Time
	err = s.write(ctx, false, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE resources SET lease_expires_at = now() + $3 * interval '1 microsecond'
			WHERE id = $1 AND lease_epoch = $2 AND lease_holder <> '' RETURNING lease_expires_at`,
			resourceID, epoch, lease.Microseconds()).Scan(&expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return leaseGone(ctx, tx, resourceID, epoch)
		}
		return err
	})
	return expires.UTC(), err
}

// leaseGone explains why a fenced write found no lease: the resource is gone,
// or the epoch is stale.
func leaseGone(ctx context.Context, tx pgx.Tx, resourceID, epoch int64) error {
	var cur int64
	var holder string
	err := tx.QueryRow(ctx, `SELECT lease_epoch, lease_holder FROM resources WHERE id = $1`, resourceID).Scan(&cur, &holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return problem.NotFoundf("resource %d not found", resourceID)
	}
	if err != nil {
		return err
	}
	if cur == epoch {
		return staleEpoch("the lease of resource %d at epoch %d was already released", resourceID, epoch)
	}
	return staleEpoch("lease epoch %d of resource %d is stale: the current epoch is %d (held by %q)", epoch, resourceID, cur, holder)
}

// Outcome is how an attempt ended.
type Outcome int

// Outcomes of an attempt.
const (
	OutcomeUnspecified Outcome = iota
	// OutcomeSuccess: done; the resource is ready (or, while deleting, its
	// cleanup ran).
	OutcomeSuccess
	// OutcomeRequeue: not done yet; come back after RequeueAfter. No failure
	// is counted.
	OutcomeRequeue
	// OutcomeError: failed; retried with backoff.
	OutcomeError
	// OutcomeTerminal: failed; not retried until the spec changes or a manual
	// trigger.
	OutcomeTerminal
)

// HistoryEntry is one row of reconciliation history.
type HistoryEntry struct {
	ID               int64
	ResourceID       int64
	Generation       int64
	Success          bool
	Phase            string
	ErrorMessage     string
	ResourcesCreated int32
	ResourcesUpdated int32
	ResourcesDeleted int32
	StartedAt        *time.Time
	DurationMS       int64
	ReconcileTime    time.Time
	LeaseEpoch       int64
	Holder           string
	Reason           string
}

// CompleteReconcileRequest is the outcome of one attempt.
type CompleteReconcileRequest struct {
	ResourceID int64
	LeaseEpoch int64
	Outcome    Outcome
	// StatusMessage is the resource's new status_message.
	StatusMessage string
	// Conditions are merged by type into the resource's conditions.
	Conditions []resource.Condition
	// Outputs replaces the outputs when not nil (a JSON object).
	Outputs []byte
	// Generation is the generation the attempt reconciled (0: the current).
	Generation int64
	// History carries the attempt's counts, phase, error, start, duration and
	// reason; the store fills generation, success, time, epoch and holder.
	History          HistoryEntry
	AddFinalizers    []string
	RemoveFinalizers []string
	// RemoveAnnotations drops annotations (no8s.io/operation: reconcile).
	RemoveAnnotations []string
	// RequeueAfter asks for another attempt (with OutcomeRequeue or
	// OutcomeSuccess).
	RequeueAfter time.Duration
	// Degraded reports a partial failure while the resource still serves
	// (seed 003): with any outcome but OutcomeSuccess the phase is Degraded
	// until the next completion.
	Degraded bool
	// Observed makes Generation the observed_generation whatever the outcome
	// (seed 004); a success always does.
	Observed bool
}

// CompleteResult is the resource after a completion.
type CompleteResult struct {
	Resource *resource.Resource
	// Purged is true when the deleting resource lost its last finalizer.
	Purged bool
}

// MaxConditions bounds the conditions of a resource.
const MaxConditions = 64

func validateConditions(path string, cs []resource.Condition) []problem.FieldError {
	var errs []problem.FieldError
	seen := map[string]bool{}
	for i, c := range cs {
		p := fmt.Sprintf("%s/%d", path, i)
		if c.Type == "" || len(c.Type) > 128 {
			errs = append(errs, problem.FieldError{Path: p + "/type", Message: "type is required, at most 128 bytes"})
		} else if seen[c.Type] {
			errs = append(errs, problem.FieldError{Path: p + "/type", Message: fmt.Sprintf("condition %q appears twice", c.Type)})
		}
		seen[c.Type] = true
		switch c.Status {
		case resource.ConditionTrue, resource.ConditionFalse, resource.ConditionUnknown:
		default:
			errs = append(errs, problem.FieldError{Path: p + "/status", Message: fmt.Sprintf("%q is not True, False or Unknown", c.Status)})
		}
		for _, f := range []struct{ name, v string }{{"type", c.Type}, {"reason", c.Reason}, {"message", c.Message}} {
			if fe := strictjson.CheckString(p+"/"+f.name, f.v); fe != nil {
				errs = append(errs, *fe)
			}
		}
	}
	if len(cs) > MaxConditions {
		errs = append(errs, problem.FieldError{Path: path, Message: fmt.Sprintf("more than %d conditions", MaxConditions)})
	}
	return errs
}

// mergeConditions stores each of in under its type in cur. A condition's
// last_transition_time is now when it is new or its status changed, and is
// kept otherwise; a zero observed_generation becomes generation. It reports
// whether anything changed.
func mergeConditions(cur, in []resource.Condition, generation int64, now time.Time) ([]resource.Condition, bool) {
	out := slices.Clone(cur)
	changed := false
	for _, c := range in {
		if c.ObservedGeneration == 0 {
			c.ObservedGeneration = generation
		}
		i := slices.IndexFunc(out, isType(c.Type))
		if i < 0 {
			c.LastTransitionTime = now
			out = append(out, c)
			changed = true
			continue
		}
		c.LastTransitionTime = out[i].LastTransitionTime
		if out[i].Status != c.Status || c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		if out[i] != c {
			out[i] = c
			changed = true
		}
	}
	return out, changed
}

func (req *CompleteReconcileRequest) validate() ([]byte, error) {
	var errs []problem.FieldError
	if req.Outcome < OutcomeSuccess || req.Outcome > OutcomeTerminal {
		errs = append(errs, problem.FieldError{Path: "/outcome", Message: "outcome is required: success, requeue, error or terminal"})
	}
	errs = append(errs, validateConditions("/conditions", req.Conditions)...)
	if fe := strictjson.CheckString("/status_message", req.StatusMessage); fe != nil {
		errs = append(errs, *fe)
	}
	for i, f := range req.AddFinalizers {
		if fe := resource.ValidateFinalizer(fmt.Sprintf("/add_finalizers/%d", i), f); fe != nil {
			errs = append(errs, *fe)
		}
	}
	if req.RequeueAfter < 0 {
		errs = append(errs, problem.FieldError{Path: "/requeue_after_seconds", Message: "must not be negative"})
	}
	if req.Generation < 0 {
		errs = append(errs, problem.FieldError{Path: "/generation", Message: "must not be negative"})
	}
	var outputs []byte
	if req.Outputs != nil {
		if len(req.Outputs) > resource.MaxSpecBytes {
			errs = append(errs, problem.FieldError{Path: "/outputs", Message: fmt.Sprintf("larger than %d bytes", resource.MaxSpecBytes)})
		} else if c, perr := resource.CompactObject("/outputs", req.Outputs); perr != nil {
			errs = append(errs, perr.Fields...)
		} else if perr := strictjson.Check(c, "/outputs"); perr != nil {
			errs = append(errs, perr.Fields...)
		} else {
			outputs = c
		}
	}
	if len(errs) > 0 {
		return nil, problem.New(problem.Invalid, problem.CodeInvalid, "invalid reconcile result").WithFields(errs...)
	}
	return outputs, nil
}

// CompleteReconcile saves the outcome of one attempt in one transaction:
// status, conditions, outputs, observed generation, finalizer and annotation
// changes, a history row (the oldest pruned beyond the limit), and releases
// the lease. The caller must present the lease's epoch: a stale one is
// refused with stale_epoch, so a stalled worker cannot overwrite a newer
// result. A completion after the lease expired is still accepted when nobody
// took the lease meanwhile. A success is one RECONCILED event, any other
// outcome one MODIFIED event; a deleting resource whose last finalizer goes
// is purged (one PURGED event).
func (s *Store) CompleteReconcile(ctx context.Context, req CompleteReconcileRequest) (*CompleteResult, error) {
	outputs, err := req.validate()
	if err != nil {
		return nil, err
	}
	limit := s.maxHistory()
	var (
		res CompleteResult
		r   *resource.Resource
		l   *leaseRow
		rv  *revisions
	)
	// Two round trips: lock and revision, then every write with COMMIT.
	err = s.pipelinedWrite(ctx, false, func(b *pgx.Batch) {
		b.Queue(lockReconcileSQL, req.ResourceID)
		queueRevisions(b, 1)
	}, func(br pgx.BatchResults) error {
		var err error
		if r, l, err = scanReconcile(br.QueryRow(), req.ResourceID); err != nil {
			return err
		}
		rv, err = scanRevisions(br, 1)
		return err
	}, func(b *pgx.Batch) error {
		if l.epoch != req.LeaseEpoch || l.holder == "" {
			return leaseError(req.ResourceID, l, req.LeaseEpoch)
		}
		now := rv.now
		gen := req.Generation
		if gen == 0 || gen > r.Generation {
			gen = r.Generation
		}
		deleting := r.DeletedAt != nil
		failures, terminal := l.failures, l.terminalGeneration
		var requeueAt *time.Time
		if req.RequeueAfter > 0 || req.Outcome == OutcomeRequeue {
			t := now.Add(req.RequeueAfter)
			requeueAt = &t
		}
		h := req.History
		h.Success = req.Outcome == OutcomeSuccess
		r.StatusMessage = req.StatusMessage
		if req.Observed || req.Outcome == OutcomeSuccess {
			r.ObservedGeneration = max(r.ObservedGeneration, gen)
		}
		switch req.Outcome {
		case OutcomeSuccess:
			failures, terminal = 0, 0
			if !deleting {
				r.Status = resource.StatusReady
			}
			if r.StatusMessage == "" {
				r.StatusMessage = "Reconciliation successful"
			}
			h.Phase = orDefault(h.Phase, "completed")
		case OutcomeRequeue:
			if !deleting {
				r.Status = resource.StatusReconciling
			}
			h.Phase = orDefault(h.Phase, "requeued")
		case OutcomeError, OutcomeTerminal:
			failures++
			if req.Outcome == OutcomeTerminal {
				terminal = gen
			}
			if !deleting {
				r.Status = resource.StatusFailed
			}
			h.ErrorMessage = orDefault(h.ErrorMessage, r.StatusMessage)
			if r.StatusMessage == "" {
				r.StatusMessage = orDefault(h.ErrorMessage, "Reconciliation failed")
			}
			h.Phase = orDefault(h.Phase, "failed")
		}
		r.Conditions, _ = mergeConditions(r.Conditions, req.Conditions, gen, now)
		if len(r.Conditions) > MaxConditions {
			return problem.New(problem.Invalid, problem.CodeInvalid, "the resource would have more than %d conditions", MaxConditions)
		}
		if outputs != nil {
			r.Outputs = outputs
		}
		fins := make([]string, 0, len(r.Finalizers)+len(req.AddFinalizers))
		for _, f := range r.Finalizers {
			if !slices.Contains(req.RemoveFinalizers, f) {
				fins = append(fins, f)
			}
		}
		for _, f := range dedupe(req.AddFinalizers) {
			// A deleting resource gains no finalizer: adding one is a no-op.
			if !deleting && !slices.Contains(fins, f) && !slices.Contains(req.RemoveFinalizers, f) {
				fins = append(fins, f)
			}
		}
		if len(fins) > resource.MaxFinalizers {
			return problem.New(problem.Invalid, problem.CodeInvalid, "the resource would have more than %d finalizers", resource.MaxFinalizers)
		}
		r.Finalizers = fins
		if len(req.RemoveAnnotations) > 0 {
			ann := make(map[string]string, len(r.Annotations))
			for k, v := range r.Annotations {
				if !slices.Contains(req.RemoveAnnotations, k) {
					ann[k] = v
				}
			}
			r.Annotations = ann
		}
		r.Phase = resource.PhaseFor(r.Status, req.Degraded && req.Outcome != OutcomeSuccess, r.Conditions)
		r.LastReconcileTime = &now
		res.Resource = r
		if deleting && len(fins) == 0 {
			// The row goes, and its history with it.
			res.Purged = true
			return rv.emit(b, change{event: eventstream.Purged, r: r, write: func(b *pgx.Batch) {
				b.Queue(`DELETE FROM resources WHERE id = $1`, r.ID)
			}})
		}
		// The attempt started when its lease was acquired, unless the worker
		// says otherwise.
		started := h.StartedAt
		if started == nil {
			started = l.acquiredAt
		}
		if h.DurationMS == 0 && started != nil && now.After(*started) {
			h.DurationMS = now.Sub(*started).Milliseconds()
		}
		var errMsg *string
		if h.ErrorMessage != "" {
			errMsg = &h.ErrorMessage
		}
		event := eventstream.Modified
		if h.Success {
			event = eventstream.Reconciled
		}
		return rv.emit(b, change{event: event, r: r, write: func(b *pgx.Batch) {
			b.Queue(`UPDATE resources SET status = $2, status_message = $3, observed_generation = $4, conditions = $5, phase = $6,
				outputs = $7, finalizers = $8, annotations = $9, resource_version = $10, updated_at = $11, last_reconcile_time = $11,
				failures = $12, terminal_generation = $13, requeue_at = $14, lease_holder = '', lease_expires_at = NULL
				WHERE id = $1`,
				r.ID, r.Status, r.StatusMessage, r.ObservedGeneration, r.Conditions, r.Phase,
				[]byte(r.Outputs), r.Finalizers, r.Annotations, r.ResourceVersion, now,
				failures, terminal, requeueAt)
			b.Queue(`INSERT INTO reconciliation_history (resource_id, generation, success, phase, error_message, resources_created,
				resources_updated, resources_deleted, started_at, duration_ms, reconcile_time, lease_epoch, holder, reason)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
				r.ID, gen, h.Success, h.Phase, errMsg, h.ResourcesCreated, h.ResourcesUpdated, h.ResourcesDeleted,
				started, h.DurationMS, now, req.LeaseEpoch, l.holder, h.Reason)
			b.Queue(`DELETE FROM reconciliation_history WHERE resource_id = $1 AND id < (
				SELECT id FROM reconciliation_history WHERE resource_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, r.ID, limit-1)
		}})
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// SchedulerLease is the state of the scheduler's leadership lease.
type SchedulerLease struct {
	// Leader is true when the caller holds the lease.
	Leader    bool
	Epoch     int64
	ExpiresAt time.Time
	Holder    string
}

// BecomeScheduler takes or renews the scheduler leadership lease. A caller
// presenting the current epoch as its holder renews it (also after expiry,
// when nobody took over: nobody else can have acted under a newer epoch). A
// caller takes it, with epoch + 1, when it is free, expired, or recorded for
// the caller's own name (a restarted process). Otherwise Leader is false and
// the answer names the current leader.
func (s *Store) BecomeScheduler(ctx context.Context, holder string, d time.Duration, epoch int64) (*SchedulerLease, error) {
	if err := validateHolder(holder); err != nil {
		return nil, err
	}
	if d == 0 {
		d = 6 * time.Second
	}
	if d < time.Second || d > MaxLease {
		return nil, problem.Field("/lease_seconds", fmt.Sprintf("must be between 1 and %d seconds", int(MaxLease/time.Second)))
	}
	var out SchedulerLease
	err := s.write(ctx, false, func(tx pgx.Tx) error {
		var curHolder string
		var expires *time.Time
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT epoch, holder, lease_expires_at, now() FROM scheduler_state WHERE id = 1 FOR UPDATE`).
			Scan(&out.Epoch, &curHolder, &expires, &now); err != nil {
			return err
		}
		renew := epoch != 0 && epoch == out.Epoch && curHolder == holder
		free := curHolder == "" || expires == nil || !expires.After(now) || curHolder == holder
		if !renew && !free {
			out.Holder, out.ExpiresAt = curHolder, expires.UTC()
			return nil
		}
		if !renew {
			out.Epoch++
		}
		out.Leader, out.Holder, out.ExpiresAt = true, holder, now.Add(d).UTC()
		_, err := tx.Exec(ctx, `UPDATE scheduler_state SET epoch = $1, holder = $2, lease_expires_at = $3, updated_at = $4 WHERE id = 1`,
			out.Epoch, holder, out.ExpiresAt, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// checkScheduler refuses a write fenced by a scheduler epoch that is not the
// current one or whose lease has expired.
func checkScheduler(ctx context.Context, tx pgx.Tx, epoch int64) error {
	var cur int64
	var valid bool
	if err := tx.QueryRow(ctx, `SELECT epoch, coalesce(lease_expires_at > now(), false) FROM scheduler_state WHERE id = 1`).Scan(&cur, &valid); err != nil {
		return err
	}
	if epoch != cur {
		return staleEpoch("scheduler epoch %d is stale: the current epoch is %d", epoch, cur)
	}
	if !valid {
		return staleEpoch("the lease of scheduler epoch %d has expired; renew it first", epoch)
	}
	return nil
}

// RecordDispatch records that the scheduler of the given epoch dispatched a
// work item for a resource. It is refused with stale_epoch unless the epoch
// is current and its lease unexpired. Only bookkeeping changes: no revision,
// no event.
func (s *Store) RecordDispatch(ctx context.Context, schedulerEpoch, resourceID int64, dispatchID string) error {
	if dispatchID == "" || len(dispatchID) > 128 {
		return problem.Field("/dispatch_id", "dispatch_id is required, at most 128 bytes")
	}
	// One statement, one round trip: the hot path of every dispatch.
	var id int64
	err := s.pool.QueryRow(ctx, `UPDATE resources SET dispatched_at = now(), dispatch_id = $3
		WHERE id = $2 AND EXISTS (SELECT 1 FROM scheduler_state WHERE id = 1 AND epoch = $1 AND lease_expires_at > now())
		RETURNING id`, schedulerEpoch, resourceID, dispatchID).Scan(&id)
	if !errors.Is(err, pgx.ErrNoRows) {
		return translate(err)
	}
	return translate(pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := checkScheduler(ctx, tx, schedulerEpoch); err != nil {
			return err
		}
		return problem.NotFoundf("resource %d not found", resourceID)
	}))
}

// SetCondition writes one condition outside a reconcile, fenced by the
// scheduler epoch like RecordDispatch. It writes nothing when the condition
// already has that status, reason and message; otherwise one MODIFIED event.
func (s *Store) SetCondition(ctx context.Context, schedulerEpoch, resourceID int64, c resource.Condition) (*resource.Resource, error) {
	if errs := validateConditions("/condition", []resource.Condition{c}); len(errs) > 0 {
		return nil, problem.New(problem.Invalid, problem.CodeInvalid, "invalid condition").WithFields(errs...)
	}
	var out *resource.Resource
	err := s.write(ctx, false, func(tx pgx.Tx) error {
		if err := checkScheduler(ctx, tx, schedulerEpoch); err != nil {
			return err
		}
		r, l, err := lockForReconcile(ctx, tx, resourceID)
		if err != nil {
			return err
		}
		out = r
		if i := slices.IndexFunc(r.Conditions, isType(c.Type)); i >= 0 {
			cur := r.Conditions[i]
			if cur.Status == c.Status && cur.Reason == c.Reason && cur.Message == c.Message {
				return nil
			}
		}
		r.Conditions, _ = mergeConditions(r.Conditions, []resource.Condition{c}, r.Generation, l.now)
		r.Phase = resource.PhaseFor(r.Status, r.Phase == resource.PhaseDegraded, r.Conditions)
		return emitTx(ctx, tx, change{event: eventstream.Modified, r: r, write: func(b *pgx.Batch) {
			b.Queue(`UPDATE resources SET conditions = $2, phase = $3, resource_version = $4, updated_at = $5 WHERE id = $1`,
				r.ID, r.Conditions, r.Phase, r.ResourceVersion, r.UpdatedAt)
		}})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RequestReconcile records a manual trigger: the next attempt consumes it.
// It is one MODIFIED event (new resource_version), so that the scheduler
// hears of it.
func (s *Store) RequestReconcile(ctx context.Context, resourceID int64) (*resource.Resource, error) {
	var out *resource.Resource
	err := s.write(ctx, false, func(tx pgx.Tx) error {
		r, err := lockResource(ctx, tx, resourceID, 0)
		if err != nil {
			return err
		}
		out = r
		return emitTx(ctx, tx, change{event: eventstream.Modified, r: r, write: func(b *pgx.Batch) {
			b.Queue(`UPDATE resources SET reconcile_requested_at = $2, resource_version = $3, updated_at = $2 WHERE id = $1`, r.ID, r.UpdatedAt, r.ResourceVersion)
		}})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

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

// ListReconcileState returns the reconcile state of resources by ascending
// id, after AfterID, or of the resources named in IDs.
func (s *Store) ListReconcileState(ctx context.Context, req ListReconcileStateRequest) (*ListReconcileStateResult, error) {
	limit := req.Limit
	if limit == 0 {
		limit = DefaultStatePage
		if len(req.IDs) > 0 {
			limit = min(len(req.IDs), MaxStatePage)
		}
	}
	if limit < 1 || limit > MaxStatePage {
		return nil, problem.Field("/limit", fmt.Sprintf("must be between 1 and %d", MaxStatePage))
	}
	if len(req.IDs) > MaxStatePage {
		return nil, problem.Field("/resource_ids", fmt.Sprintf("at most %d ids", MaxStatePage))
	}
	ids := req.IDs
	if ids == nil {
		ids = []int64{}
	}
	out := &ListReconcileStateResult{States: []ReconcileState{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT published_revision FROM relay_state WHERE id = 1`).Scan(&out.ResourceVersion); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT r.id, r.uid, r.name, r.resource_type_name, r.resource_type_version, r.generation,
			r.observed_generation, r.status, r.deleted_at IS NOT NULL, r.failures, r.terminal_generation, r.last_reconcile_time,
			r.reconcile_requested_at, coalesce(r.annotations ->> $4, ''), r.lease_expires_at, r.dispatched_at, r.requeue_at,
			r.resource_version, r.lease_epoch, r.lease_holder, r.dispatch_id,
			EXISTS (SELECT 1 FROM jsonb_array_elements(r.conditions) c WHERE c ->> 'type' = $5 AND c ->> 'status' <> 'True'),
			r.deleted_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(r.finalizers) f WHERE starts_with(f, 'reconciler.no8s.io/')),
			t.reconcile_policy
			FROM resources r LEFT JOIN resource_types t ON t.id = r.resource_type_id
			WHERE r.id > $1 AND (cardinality($2::bigint[]) = 0 OR r.id = ANY($2)) ORDER BY r.id LIMIT $3`,
			req.AfterID, ids, limit, resource.AnnotationOperation, resource.ConditionReconcilerAvailable)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st ReconcileState
			var uid uuid.UUID
			var op string
			var policy []byte
			if err := rows.Scan(&st.ResourceID, &uid, &st.Name, &st.ResourceTypeName, &st.ResourceTypeVersion, &st.Generation,
				&st.ObservedGeneration, &st.Status, &st.Deleting, &st.Failures, &st.TerminalGeneration, &st.LastReconcileTime,
				&st.ReconcileRequestedAt, &op, &st.LeaseExpiresAt, &st.DispatchedAt, &st.RequeueAt,
				&st.ResourceVersion, &st.LeaseEpoch, &st.LeaseHolder, &st.DispatchID, &st.ReconcilerUnavailable, &st.CleanupDone, &policy); err != nil {
				return err
			}
			st.UID = uid.String()
			st.AnnotationReconcile = op == resource.OperationReconcile
			st.AnnotationIgnore = op == resource.OperationIgnore
			st.Policy = decodePolicy(policy).WithDefaults()
			for _, t := range []**time.Time{&st.LastReconcileTime, &st.ReconcileRequestedAt, &st.LeaseExpiresAt, &st.DispatchedAt, &st.RequeueAt} {
				if *t != nil {
					u := (*t).UTC()
					*t = &u
				}
			}
			out.States = append(out.States, st)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// ListHistoryRequest pages through a resource's history, newest first.
type ListHistoryRequest struct {
	ResourceID int64
	Limit      int
	// BeforeID returns rows older than this id (0: from the newest).
	BeforeID int64
}

// ListHistory returns a resource's reconciliation history, newest first.
func (s *Store) ListHistory(ctx context.Context, req ListHistoryRequest) ([]HistoryEntry, error) {
	limit := req.Limit
	if limit == 0 {
		limit = DefaultHistoryPage
	}
	if limit < 1 || limit > MaxHistoryPage {
		return nil, problem.Field("/limit", fmt.Sprintf("must be between 1 and %d", MaxHistoryPage))
	}
	if req.BeforeID < 0 {
		return nil, problem.Field("/before", "must be a positive id")
	}
	rows, err := s.pool.Query(ctx, `SELECT id, resource_id, generation, success, phase, coalesce(error_message, ''), resources_created,
		resources_updated, resources_deleted, started_at, duration_ms, reconcile_time, lease_epoch, holder, reason
		FROM reconciliation_history WHERE resource_id = $1 AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`,
		req.ResourceID, req.BeforeID, limit)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []HistoryEntry{}
	for rows.Next() {
		var h HistoryEntry
		if err := rows.Scan(&h.ID, &h.ResourceID, &h.Generation, &h.Success, &h.Phase, &h.ErrorMessage, &h.ResourcesCreated,
			&h.ResourcesUpdated, &h.ResourcesDeleted, &h.StartedAt, &h.DurationMS, &h.ReconcileTime, &h.LeaseEpoch, &h.Holder, &h.Reason); err != nil {
			return nil, translate(err)
		}
		h.ReconcileTime = h.ReconcileTime.UTC()
		if h.StartedAt != nil {
			t := h.StartedAt.UTC()
			h.StartedAt = &t
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	if len(out) == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM resources WHERE id = $1)`, req.ResourceID).Scan(&exists); err != nil {
			return nil, translate(err)
		}
		if !exists {
			return nil, problem.NotFoundf("resource %d not found", req.ResourceID)
		}
	}
	return out, nil
}

// ReleaseScheduler gives up the scheduler lease of the given epoch (a
// graceful stop): it expires at once, so that a standby takes over at its
// next campaign. Releasing an epoch that is no longer current does nothing.
func (s *Store) ReleaseScheduler(ctx context.Context, holder string, epoch int64) error {
	return s.write(ctx, false, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE scheduler_state SET lease_expires_at = now(), updated_at = now()
			WHERE id = 1 AND epoch = $1 AND holder = $2`, epoch, holder)
		return err
	})
}
