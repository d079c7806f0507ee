package storage

import (
	"errors"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
)

// TestCompleteOutcomePolicy is the outcome→status table of a completion,
// on a live and on a deleting resource.
func TestCompleteOutcomePolicy(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		outcome              lifecycle.Outcome
		deleting             bool
		status, event, phase string
		failures, terminal   int64
		observed             int64
		requeue              bool
	}{
		{lifecycle.OutcomeSuccess, false, resource.StatusReady, envelope.Reconciled, "completed", 0, 0, 2, false},
		{lifecycle.OutcomeRequeue, false, resource.StatusReconciling, envelope.Modified, "requeued", 3, 1, 1, true},
		{lifecycle.OutcomeError, false, resource.StatusFailed, envelope.Modified, "failed", 4, 1, 1, false},
		{lifecycle.OutcomeTerminal, false, resource.StatusFailed, envelope.Modified, "failed", 4, 2, 1, false},
		{lifecycle.OutcomeSuccess, true, resource.StatusDeleting, envelope.Reconciled, "completed", 0, 0, 2, false},
		{lifecycle.OutcomeError, true, resource.StatusDeleting, envelope.Modified, "failed", 4, 1, 1, false},
	} {
		r := &resource.Resource{ID: 7, Generation: 2, ObservedGeneration: 1, Status: resource.StatusReconciling, Finalizers: []string{"example.com/keep"}}
		if c.deleting {
			r.Status, r.DeletedAt = resource.StatusDeleting, &now
		}
		l := &LeaseState{Holder: "w", Epoch: 5, Failures: 3, TerminalGeneration: 1, Now: now}
		req := &CompleteReconcileRequest{ResourceID: 7, LeaseEpoch: 5, Outcome: c.outcome}
		got, err := Complete(r, l, req, nil, now)
		if err != nil {
			t.Fatalf("%v deleting=%v: %v", c.outcome, c.deleting, err)
		}
		if r.Status != c.status || got.Event != c.event || got.History.Phase != c.phase || int64(got.Failures) != c.failures ||
			got.TerminalGeneration != c.terminal || r.ObservedGeneration != c.observed || (got.RequeueAt != nil) != c.requeue ||
			got.Purge || got.History.Holder != "w" || got.History.LeaseEpoch != 5 || got.History.Generation != 2 {
			t.Errorf("%v deleting=%v: status %s, %+v, observed %d", c.outcome, c.deleting, r.Status, got, r.ObservedGeneration)
		}
	}
	// A stale epoch, and a released lease, are refused.
	r := &resource.Resource{ID: 7, Generation: 1}
	for _, l := range []*LeaseState{{Holder: "w", Epoch: 6}, {Holder: "", Epoch: 5}} {
		if _, err := Complete(r, l, &CompleteReconcileRequest{ResourceID: 7, LeaseEpoch: 5}, nil, now); !errors.Is(err, ErrStaleEpoch) {
			t.Errorf("lease %+v: %v, want stale epoch", l, err)
		}
	}
	// A deleting resource losing its last finalizer is purged.
	r = &resource.Resource{ID: 7, Generation: 1, DeletedAt: &now, Finalizers: []string{"example.com/keep"}}
	got, err := Complete(r, &LeaseState{Holder: "w", Epoch: 1}, &CompleteReconcileRequest{ResourceID: 7, LeaseEpoch: 1,
		Outcome: lifecycle.OutcomeSuccess, RemoveFinalizers: []string{"example.com/keep"}, AddFinalizers: []string{"example.com/late"}}, nil, now)
	if err != nil || !got.Purge || got.Event != envelope.Purged || len(r.Finalizers) != 0 {
		t.Fatalf("purge: %+v %v, finalizers %v", got, err, r.Finalizers)
	}
}

// TestCampaign is the scheduler leadership table.
func TestCampaign(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	live, past := now.Add(time.Second), now.Add(-time.Second)
	for _, c := range []struct {
		name       string
		cur        SchedulerState
		holder     string
		epoch      int64
		leader     bool
		wantEpoch  int64
		wantHolder string
	}{
		{"free", SchedulerState{Now: now}, "a", 0, true, 1, "a"},
		{"held by another", SchedulerState{Epoch: 3, Holder: "b", ExpiresAt: &live, Now: now}, "a", 0, false, 3, "b"},
		{"expired", SchedulerState{Epoch: 3, Holder: "b", ExpiresAt: &past, Now: now}, "a", 0, true, 4, "a"},
		{"renew", SchedulerState{Epoch: 3, Holder: "a", ExpiresAt: &live, Now: now}, "a", 3, true, 3, "a"},
		{"renew after expiry", SchedulerState{Epoch: 3, Holder: "a", ExpiresAt: &past, Now: now}, "a", 3, true, 3, "a"},
		{"restarted process", SchedulerState{Epoch: 3, Holder: "a", ExpiresAt: &live, Now: now}, "a", 0, true, 4, "a"},
		{"deposed renewal", SchedulerState{Epoch: 4, Holder: "b", ExpiresAt: &live, Now: now}, "a", 3, false, 4, "b"},
	} {
		got := Campaign(c.cur, c.holder, 5*time.Second, c.epoch)
		if got.Leader != c.leader || got.Epoch != c.wantEpoch || got.Holder != c.wantHolder {
			t.Errorf("%s: %+v", c.name, got)
		}
		if got.Leader && !got.ExpiresAt.Equal(now.Add(5*time.Second)) {
			t.Errorf("%s: expires %v", c.name, got.ExpiresAt)
		}
	}
}
