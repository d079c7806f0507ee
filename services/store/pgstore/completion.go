package pgstore

// Completion of an attempt (docs/design/reconcile.md, "Store additions"): the
// outcome→status policy, the merge of conditions, finalizer and annotation
// changes and the history row, all in one transaction and one event; and
// the reading of that history.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// History bounds.
const (
	// DefaultHistoryLimit is how many history rows a resource keeps.
	DefaultHistoryLimit = 100
	// DefaultHistoryPage and MaxHistoryPage bound a history page.
	DefaultHistoryPage = 50
	MaxHistoryPage     = 500
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
	Outcome    lifecycle.Outcome
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
	// RequeueAfter asks for another attempt (with lifecycle.OutcomeRequeue or
	// lifecycle.OutcomeSuccess).
	RequeueAfter time.Duration
	// Degraded reports a partial failure while the resource still serves
	// (seed 003): with any outcome but lifecycle.OutcomeSuccess the phase is Degraded
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

func validateConditions(path string, cs []resource.Condition) []FieldError {
	var errs []FieldError
	seen := map[string]bool{}
	for i, c := range cs {
		p := fmt.Sprintf("%s/%d", path, i)
		if c.Type == "" || len(c.Type) > 128 {
			errs = append(errs, FieldError{Path: p + "/type", Message: "type is required, at most 128 bytes"})
		} else if seen[c.Type] {
			errs = append(errs, FieldError{Path: p + "/type", Message: fmt.Sprintf("condition %q appears twice", c.Type)})
		}
		seen[c.Type] = true
		switch c.Status {
		case resource.ConditionTrue, resource.ConditionFalse, resource.ConditionUnknown:
		default:
			errs = append(errs, FieldError{Path: p + "/status", Message: fmt.Sprintf("%q is not True, False or Unknown", c.Status)})
		}
		for _, f := range []struct{ name, v string }{{"type", c.Type}, {"reason", c.Reason}, {"message", c.Message}} {
			if fe := strictjson.CheckString(p+"/"+f.name, f.v); fe != nil {
				errs = append(errs, fieldOf(fe)...)
			}
		}
	}
	if len(cs) > MaxConditions {
		errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("more than %d conditions", MaxConditions)})
	}
	return errs
}

func (req *CompleteReconcileRequest) validate() ([]byte, error) {
	var errs []FieldError
	if req.Outcome < lifecycle.OutcomeSuccess || req.Outcome > lifecycle.OutcomeTerminal {
		errs = append(errs, FieldError{Path: "/outcome", Message: "outcome is required: success, requeue, error or terminal"})
	}
	errs = append(errs, validateConditions("/conditions", req.Conditions)...)
	if fe := strictjson.CheckString("/status_message", req.StatusMessage); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	for i, f := range req.AddFinalizers {
		if fe := names.Finalizer(fmt.Sprintf("/add_finalizers/%d", i), f); fe != nil {
			errs = append(errs, fieldOf(fe)...)
		}
	}
	if req.RequeueAfter < 0 {
		errs = append(errs, FieldError{Path: "/requeue_after_seconds", Message: "must not be negative"})
	}
	if req.Generation < 0 {
		errs = append(errs, FieldError{Path: "/generation", Message: "must not be negative"})
	}
	var outputs []byte
	if req.Outputs != nil {
		if len(req.Outputs) > names.MaxSpecBytes {
			errs = append(errs, FieldError{Path: "/outputs", Message: fmt.Sprintf("larger than %d bytes", names.MaxSpecBytes)})
		} else if c, perr := resource.CompactObject("/outputs", req.Outputs); perr != nil {
			errs = append(errs, fieldsOf(perr.Fields)...)
		} else if perr := strictjson.Check(c, "/outputs"); perr != nil {
			errs = append(errs, fieldsOf(perr.Fields)...)
		} else {
			outputs = c
		}
	}
	if len(errs) > 0 {
		return nil, newError(ErrInvalid, "invalid reconcile result").withFields(errs...)
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
		if req.RequeueAfter > 0 || req.Outcome == lifecycle.OutcomeRequeue {
			t := now.Add(req.RequeueAfter)
			requeueAt = &t
		}
		h := req.History
		h.Success = req.Outcome == lifecycle.OutcomeSuccess
		r.StatusMessage = req.StatusMessage
		if req.Observed || req.Outcome == lifecycle.OutcomeSuccess {
			r.ObservedGeneration = max(r.ObservedGeneration, gen)
		}
		switch req.Outcome {
		case lifecycle.OutcomeSuccess:
			failures, terminal = 0, 0
			if !deleting {
				r.Status = resource.StatusReady
			}
			if r.StatusMessage == "" {
				r.StatusMessage = "Reconciliation successful"
			}
			h.Phase = orDefault(h.Phase, "completed")
		case lifecycle.OutcomeRequeue:
			if !deleting {
				r.Status = resource.StatusReconciling
			}
			h.Phase = orDefault(h.Phase, "requeued")
		case lifecycle.OutcomeError, lifecycle.OutcomeTerminal:
			failures++
			if req.Outcome == lifecycle.OutcomeTerminal {
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
		r.Conditions, _ = lifecycle.Merge(r.Conditions, req.Conditions, gen, now)
		if len(r.Conditions) > MaxConditions {
			return newError(ErrInvalid, "the resource would have more than %d conditions", MaxConditions)
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
		if len(fins) > names.MaxFinalizers {
			return newError(ErrInvalid, "the resource would have more than %d finalizers", names.MaxFinalizers)
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
		r.Phase = resource.PhaseFor(r.Status, req.Degraded && req.Outcome != lifecycle.OutcomeSuccess, r.Conditions)
		r.LastReconcileTime = &now
		res.Resource = r
		if deleting && len(fins) == 0 {
			// The row goes, and its history with it.
			res.Purged = true
			return rv.emit(b, change{event: envelope.Purged, r: r, write: func(b *pgx.Batch) {
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
		event := envelope.Modified
		if h.Success {
			event = envelope.Reconciled
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
		return nil, invalidField("/limit", fmt.Sprintf("must be between 1 and %d", MaxHistoryPage))
	}
	if req.BeforeID < 0 {
		return nil, invalidField("/before", "must be a positive id")
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
			return nil, notFound("resource %d not found", req.ResourceID)
		}
	}
	return out, nil
}
