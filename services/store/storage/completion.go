package storage

// Completion of an attempt (docs/design/reconcile.md, "Store additions"): the
// outcome→status policy, the merge of conditions, finalizer and annotation
// changes and the history row, which a backend writes in one transaction
// and one event; conditions written outside an attempt; and the reading of
// history.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

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

// MaxConditions bounds the conditions of a resource.
const MaxConditions = 64

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
	// Actor limits the completion to a lease held by the calling
	// reconciler identity on a type it is issued for (nil: no limit).
	Actor   *Actor
	Outcome lifecycle.Outcome
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
	// Events are recorded on the resource in the completing transaction
	// (RecordEvent's rules), with the lease holder's reconciler as source.
	Events []EventInput
	// Dependencies replace the resource's: what the attempt depends on
	// beyond its children (at most MaxDependencies).
	Dependencies []Dependency
}

// MaxDependencies bounds the dependencies of one completion.
const MaxDependencies = 64

// Dependency names a resource an attempt depends on, which need not exist:
// the scheduler reconciles the resource again when that one is created,
// changes or goes (docs/design/relationships.md, "Watches and WaitFor").
type Dependency struct {
	TypeName    string `json:"type_name"`
	TypeVersion string `json:"type_version"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	// Wait: the attempt ended waiting for it (a terminal failure that is
	// retried when it changes).
	Wait bool `json:"wait,omitempty"`
}

// EncodeDependencies is the column value of deps (a JSON array).
func EncodeDependencies(deps []Dependency) []byte {
	if len(deps) == 0 {
		return []byte("[]")
	}
	b, err := json.Marshal(deps)
	if err != nil {
		panic(fmt.Sprintf("storage: encoding dependencies: %v", err)) // strings and a bool always encode
	}
	return b
}

// DecodeDependencies reads a dependencies column; a value that is not a
// JSON array of dependencies reads as none.
func DecodeDependencies(b []byte) []Dependency {
	var deps []Dependency
	if len(b) > 0 && json.Unmarshal(b, &deps) != nil {
		return nil
	}
	return deps
}

func validateDependencies(path string, deps []Dependency) []FieldError {
	if len(deps) > MaxDependencies {
		return []FieldError{{Path: path, Message: fmt.Sprintf("more than %d dependencies", MaxDependencies)}}
	}
	var errs []FieldError
	for i, d := range deps {
		p := fmt.Sprintf("%s/%d", path, i)
		for _, fe := range []*names.FieldError{
			names.TypeName(p+"/type_name", d.TypeName), names.TypeVersion(p+"/type_version", d.TypeVersion),
			names.Namespace(p+"/namespace", d.Namespace), names.Name(p+"/name", d.Name),
		} {
			errs = append(errs, fieldOf(fe)...)
		}
	}
	return errs
}

// CompleteResult is the resource after a completion.
type CompleteResult struct {
	Resource *resource.Resource
	// Purged is true when the deleting resource lost its last finalizer.
	Purged bool
}

// ListHistoryRequest pages through a resource's history, newest first.
type ListHistoryRequest struct {
	ResourceID int64
	Limit      int
	// BeforeID returns rows older than this id (0: from the newest).
	BeforeID int64
}

// HistoryPage validates a history request and returns its page size.
func HistoryPage(req ListHistoryRequest) (int, error) {
	limit := req.Limit
	if limit == 0 {
		limit = DefaultHistoryPage
	}
	if limit < 1 || limit > MaxHistoryPage {
		return 0, InvalidField("/limit", fmt.Sprintf("must be between 1 and %d", MaxHistoryPage))
	}
	if req.BeforeID < 0 {
		return 0, InvalidField("/before", "must be a positive id")
	}
	return limit, nil
}

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

// ValidateCondition checks a condition written outside an attempt
// (SetCondition).
func ValidateCondition(c resource.Condition) error {
	if errs := validateConditions("/condition", []resource.Condition{c}); len(errs) > 0 {
		return NewError(ErrInvalid, "invalid condition").WithFields(errs...)
	}
	return nil
}

// ApplyCondition merges c into r's conditions at now and reports whether
// anything changed: nothing does when the condition already has that
// status, reason and message.
func ApplyCondition(r *resource.Resource, c resource.Condition, now time.Time) bool {
	if i := slices.IndexFunc(r.Conditions, isType(c.Type)); i >= 0 {
		cur := r.Conditions[i]
		if cur.Status == c.Status && cur.Reason == c.Reason && cur.Message == c.Message {
			return false
		}
	}
	r.Conditions, _ = lifecycle.Merge(r.Conditions, []resource.Condition{c}, r.Generation, now)
	r.Phase = resource.PhaseFor(r.Status, r.Phase == resource.PhaseDegraded, r.Conditions)
	return true
}

// Validate checks a completion and returns its outputs in compact form (nil:
// unchanged).
func (req *CompleteReconcileRequest) Validate() ([]byte, error) {
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
	errs = append(errs, validateDependencies("/dependencies", req.Dependencies)...)
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
	if err := ValidateEvents("/events", req.Events); err != nil {
		var se *Error
		if errors.As(err, &se) {
			errs = append(errs, se.Fields...)
		}
	}
	if len(errs) > 0 {
		return nil, NewError(ErrInvalid, "invalid reconcile result").WithFields(errs...)
	}
	return outputs, nil
}

// Completion is what a completion makes of a resource: r itself is changed
// in place; the rest is what the backend writes beside it.
type Completion struct {
	// Event is the event type: RECONCILED on success, MODIFIED otherwise,
	// PURGED when Purge is set.
	Event string
	// Purge: the deleting resource lost its last finalizer; the row goes,
	// its history with it, and nothing else is written.
	Purge bool
	// Failures, TerminalGeneration and RequeueAt are the new reconcile
	// bookkeeping; the lease is released.
	Failures           int32
	TerminalGeneration int64
	RequeueAt          *time.Time
	// History is the row to add (its ID unset), with Generation, Success,
	// Phase, ErrorMessage, StartedAt, DurationMS, ReconcileTime, LeaseEpoch
	// and Holder filled in.
	History HistoryEntry
}

// Complete applies the outcome of one attempt to r, whose lease l was read
// under the row lock, at the transaction's time now; outputs is what
// req.Validate returned. It refuses a stale epoch, or a lease already
// released, with ErrStaleEpoch (a completion after the lease expired is
// still accepted when nobody took the lease meanwhile). It sets r's status,
// status message, observed generation, conditions, outputs, finalizers,
// annotations, phase and last reconcile time, and the source of req's events
// (EventSource of the holder).
func Complete(r *resource.Resource, l *LeaseState, req *CompleteReconcileRequest, outputs []byte, now time.Time) (*Completion, error) {
	if err := req.Actor.Permits(r.ID, r.ResourceTypeName+"/"+r.ResourceTypeVersion, l.Holder); err != nil {
		return nil, err
	}
	if l.Epoch != req.LeaseEpoch || l.Holder == "" {
		return nil, LeaseError(req.ResourceID, l, req.LeaseEpoch)
	}
	for i := range req.Events {
		req.Events[i].Source = EventSource(l.Holder)
	}
	gen := req.Generation
	if gen == 0 || gen > r.Generation {
		gen = r.Generation
	}
	deleting := r.DeletedAt != nil
	c := &Completion{Failures: l.Failures, TerminalGeneration: l.TerminalGeneration}
	if req.RequeueAfter > 0 || req.Outcome == lifecycle.OutcomeRequeue {
		t := now.Add(req.RequeueAfter)
		c.RequeueAt = &t
	}
	h := req.History
	h.Success = req.Outcome == lifecycle.OutcomeSuccess
	r.StatusMessage = req.StatusMessage
	if req.Observed || req.Outcome == lifecycle.OutcomeSuccess {
		r.ObservedGeneration = max(r.ObservedGeneration, gen)
	}
	applyOutcome(r, c, &h, req.Outcome, gen, deleting)
	r.Conditions, _ = lifecycle.Merge(r.Conditions, req.Conditions, gen, now)
	if len(r.Conditions) > MaxConditions {
		return nil, NewError(ErrInvalid, "the resource would have more than %d conditions", MaxConditions)
	}
	if outputs != nil {
		r.Outputs = outputs
	}
	fins, err := nextFinalizers(r.Finalizers, req, deleting)
	if err != nil {
		return nil, err
	}
	r.Finalizers = fins
	if len(req.RemoveAnnotations) > 0 {
		r.Annotations = withoutKeys(r.Annotations, req.RemoveAnnotations)
	}
	r.Phase = resource.PhaseFor(r.Status, req.Degraded && req.Outcome != lifecycle.OutcomeSuccess, r.Conditions)
	r.LastReconcileTime = &now
	if deleting && len(fins) == 0 {
		c.Event, c.Purge = envelope.Purged, true
		return c, nil
	}
	finishHistory(&h, r.ID, gen, l, req.LeaseEpoch, now)
	c.History = h
	c.Event = envelope.Modified
	if h.Success {
		c.Event = envelope.Reconciled
	}
	return c, nil
}

// applyOutcome sets r's status and status message, c's failure count and
// terminal generation, and h's phase and error message as outcome says; a
// deleting resource keeps its status.
func applyOutcome(r *resource.Resource, c *Completion, h *HistoryEntry, outcome lifecycle.Outcome, gen int64, deleting bool) {
	switch outcome {
	case lifecycle.OutcomeSuccess:
		c.Failures, c.TerminalGeneration = 0, 0
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
		c.Failures++
		if outcome == lifecycle.OutcomeTerminal {
			c.TerminalGeneration = gen
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
}

// nextFinalizers is cur without req's removed finalizers, then with its
// added ones (each once, none of the removed ones, none at all on a
// deleting resource); more than names.MaxFinalizers is ErrInvalid.
func nextFinalizers(cur []string, req *CompleteReconcileRequest, deleting bool) ([]string, error) {
	fins := make([]string, 0, len(cur)+len(req.AddFinalizers))
	for _, f := range cur {
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
		return nil, NewError(ErrInvalid, "the resource would have more than %d finalizers", names.MaxFinalizers)
	}
	return fins, nil
}

// withoutKeys is a copy of m without the keys listed in remove.
func withoutKeys(m map[string]string, remove []string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !slices.Contains(remove, k) {
			out[k] = v
		}
	}
	return out
}

// finishHistory fills in h, the history row of the attempt on resource id
// under lease l (its epoch), completed at now.
func finishHistory(h *HistoryEntry, id, gen int64, l *LeaseState, epoch int64, now time.Time) {
	// The attempt started when its lease was acquired, unless the worker
	// says otherwise.
	if h.StartedAt == nil {
		h.StartedAt = l.AcquiredAt
	}
	if h.DurationMS == 0 && h.StartedAt != nil && now.After(*h.StartedAt) {
		h.DurationMS = now.Sub(*h.StartedAt).Milliseconds()
	}
	h.ResourceID, h.Generation, h.ReconcileTime, h.LeaseEpoch, h.Holder = id, gen, now, epoch, l.Holder
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
