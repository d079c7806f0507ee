package github

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Output keys the plugin writes.
const (
	// OutputRun is the run record (Run): the plugin's state and what users
	// read about the current run.
	OutputRun = "run"
	// OutputJobs lists the completed run's jobs (the original Operator
	// Controller's format).
	OutputJobs = "jobs"
	// OutputArtifacts lists the completed run's artifacts.
	OutputArtifacts = "artifacts"
)

// Operations a run is for.
const (
	OpApply   = "apply"
	OpDestroy = "destroy"
)

// Run statuses besides GitHub's own (queued, in_progress, waiting,
// requested, pending, completed).
const (
	// StatusDispatching: a dispatch was sent and got no clear answer (a
	// 5xx, a broken connection): the run may exist. It is looked for by its
	// correlation id before anything is dispatched again.
	StatusDispatching = "dispatching"
	// StatusDispatched: GitHub accepted the dispatch without saying which
	// run it started (older GitHub Enterprise Server): it is looked for by
	// its correlation id.
	StatusDispatched = "dispatched"
	// StatusCompleted is GitHub's.
	StatusCompleted = "completed"
	// ConclusionVanished: the run is gone (404), or was never found.
	ConclusionVanished = "vanished"
)

// Run is the record of the current run, saved in the outputs under
// OutputRun.
type Run struct {
	// Operation is apply or destroy.
	Operation string `json:"operation"`
	// Generation is the resource generation the run is for.
	Generation int64 `json:"generation"`
	// Attempt counts the runs dispatched for this generation and
	// operation: 2 after a failed run was retried.
	Attempt int `json:"attempt"`
	// CorrelationID is sent as the no8s_correlation_id input.
	CorrelationID string `json:"correlation_id"`
	Repository    string `json:"repository"`
	Workflow      string `json:"workflow"`
	Ref           string `json:"ref"`
	// ID is GitHub's run id (0 until known).
	ID      int64  `json:"id,omitempty"`
	HTMLURL string `json:"html_url,omitempty"`
	// Status is GitHub's run status, or dispatching / dispatched.
	Status     string    `json:"status"`
	Conclusion string    `json:"conclusion,omitempty"`
	Dispatched time.Time `json:"dispatched_at"`
	// Updated is when an attempt last wrote this record, and Epoch that
	// attempt's lease epoch (a gap means an attempt ended without saving).
	Updated time.Time `json:"updated_at"`
	Epoch   int64     `json:"epoch"`
	// Transient counts the consecutive transient failures (5xx, broken
	// connections) for the delay of the next try.
	Transient int `json:"transient_failures,omitempty"`
}

// readRun decodes the run record from the outputs (nil when there is none
// or it does not decode).
func readRun(outputs map[string]any) *Run {
	v, ok := outputs[OutputRun]
	if !ok || v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var r Run
	if json.Unmarshal(b, &r) != nil || (r.Operation != OpApply && r.Operation != OpDestroy) || r.Attempt < 1 {
		return nil
	}
	return &r
}

// asOutput is the record as an outputs value (a JSON object).
func (r *Run) asOutput() map[string]any {
	b, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// finished reports whether the run has ended (and was seen to end).
func (r *Run) finished() bool { return r.Status == StatusCompleted }

// succeeded reports whether it ended well.
func (r *Run) succeeded() bool {
	return r.finished() && (r.Conclusion == "success" || r.Conclusion == "neutral" || r.Conclusion == "skipped")
}

// describe names the run for messages.
func (r *Run) describe() string {
	s := fmt.Sprintf("%s run %d of %s/%s", r.Operation, r.Attempt, r.Repository, r.Workflow)
	if r.ID != 0 {
		s += fmt.Sprintf(" (run id %d)", r.ID)
	}
	return s
}

// correlationID names one dispatch: the resource, the operation, the
// generation and the attempt.
func correlationID(uid, op string, gen int64, attempt int) string {
	return fmt.Sprintf("no8s-%s-%s-g%d-r%d", op, uid, gen, attempt)
}

// carries reports whether a run's title carries the correlation id id, as
// a whole word (so that ...-r1 is not found in ...-r12).
func carries(title, id string) bool {
	for i := 0; i+len(id) <= len(title); i++ {
		j := i + len(id)
		if title[i:j] != id {
			continue
		}
		if i > 0 {
			if r, _ := utf8.DecodeLastRuneInString(title[:i]); unicode.IsLetter(r) || unicode.IsDigit(r) {
				continue
			}
		}
		if j == len(title) {
			return true
		}
		if r, _ := utf8.DecodeRuneInString(title[j:]); !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return true
		}
	}
	return false
}
