package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/sdk"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// TestEventRecords: Events (the Kubernetes kind) are recorded through the
// API and by a reconciler (req.Event, saved with its result through the
// workers' door), deduplicated by (type, reason, message) with a growing
// count, listed newest first at /resources/{id}/event-records and
// /event-records, beside the SSE /resources/{id}/events path (whose tests
// are the watch tests); bad ones are refused with field paths.
func TestEventRecords(t *testing.T) {
	createTypeUnserved(t, "Noisy", "v1", `{"type":"object"}`)
	rec := sdk.New[map[string]any]("engine-noisy", sdk.Func[map[string]any](func(_ context.Context, req *sdk.Request[map[string]any]) (sdk.Result, error) {
		req.Event(names.EventWarning, "BackendDown", "the backend did not answer")
		return sdk.Result{}, fmt.Errorf("backend down")
	}))
	startWorker(t, "Noisy", "v1", rec)
	r := createResource(t, map[string]any{"name": "n1", "resource_type_name": "Noisy", "resource_type_version": "v1", "spec": map[string]any{}})
	path := fmt.Sprintf("/api/v1/resources/%d/event-records", r.ID)

	// The reconciler's event: each failed attempt raises the count of one Warning.
	for i := 1; i <= 3; i++ {
		reconcileNow(t, r)
		deadline := time.Now().Add(10 * time.Second)
		for {
			evs := decode[[]eventRecordDoc](t, do(t, http.MethodGet, path+"?reason=BackendDown", nil).expect(t, http.StatusOK))
			if len(evs) == 1 && evs[0].Count == int32(i) {
				if evs[0].Type != "Warning" || evs[0].Source != "reconciler/engine-noisy" || evs[0].ResourceName != "n1" {
					t.Fatalf("event %+v", evs[0])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after attempt %d: %+v", i, evs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// A client records one; the repeat answers the same record, counted.
	body := map[string]any{"type": "Normal", "reason": "Checked", "message": "all good", "source": "test"}
	first := decode[eventRecordDoc](t, do(t, http.MethodPost, path, body).expect(t, http.StatusCreated))
	again := decode[eventRecordDoc](t, do(t, http.MethodPost, path, body).expect(t, http.StatusCreated))
	if again.ID != first.ID || again.Count != 2 || first.Count != 1 {
		t.Fatalf("repeat: %+v then %+v", first, again)
	}
	evs := decode[[]eventRecordDoc](t, do(t, http.MethodGet, path, nil).expect(t, http.StatusOK))
	if len(evs) != 2 || evs[0].Reason != "Checked" || evs[1].Reason != "BackendDown" {
		t.Fatalf("list %+v", evs)
	}
	all := decode[[]eventRecordDoc](t, do(t, http.MethodGet, fmt.Sprintf("/api/v1/event-records?resource_id=%d&type=Normal", r.ID), nil).expect(t, http.StatusOK))
	if len(all) != 1 || all[0].ID != first.ID {
		t.Fatalf("filtered list %+v", all)
	}
	page := decode[[]eventRecordDoc](t, do(t, http.MethodGet, fmt.Sprintf("%s?limit=1&before=%d", path, evs[0].ID), nil).expect(t, http.StatusOK))
	if len(page) != 1 || page[0].ID != evs[1].ID {
		t.Fatalf("page %+v", page)
	}

	// Bad input: field paths, nothing written.
	do(t, http.MethodPost, path, map[string]any{"type": "Loud", "reason": "lower case", "message": ""}).
		expectError(t, http.StatusBadRequest, "invalid", "/type", "/reason", "/message")
	do(t, http.MethodPost, path, map[string]any{"type": "Normal", "reason": "X", "message": strings.Repeat("m", 1025)}).
		expectError(t, http.StatusBadRequest, "invalid", "/message")
	// A reconciler's source is reserved (issue 27): a client cannot pass
	// its Event off as one.
	do(t, http.MethodPost, path, map[string]any{"type": "Normal", "reason": "X", "message": "m", "source": "reconciler/noop"}).
		expectError(t, http.StatusBadRequest, "invalid", "/source")
	do(t, http.MethodPost, path, map[string]any{"type": "Normal", "reason": "X", "message": "m", "source": strings.Repeat("s", 254)}).
		expectError(t, http.StatusBadRequest, "invalid", "/source")
	do(t, http.MethodGet, path+"?type=Loud", nil).expectError(t, http.StatusBadRequest, "invalid", "/type")
	do(t, http.MethodGet, "/api/v1/resources/987654/event-records", nil).expectError(t, http.StatusNotFound, "not_found")
	do(t, http.MethodPost, "/api/v1/resources/987654/event-records", body).expectError(t, http.StatusNotFound, "not_found")
	if n := len(decode[[]eventRecordDoc](t, do(t, http.MethodGet, path, nil))); n != 2 {
		t.Fatalf("bad input wrote events: %d", n)
	}
}

// TestFencedWrites: writes carrying X-No8s-Fence-Lease/-Epoch commit only
// while that epoch is the lease's current one (409 stale_epoch and nothing
// written otherwise).
func TestFencedWrites(t *testing.T) {
	createType(t, "Fenced", "v1", `{"type":"object"}`)
	wc := reconcilev1.NewWorkerServiceClient(env.workerConn)
	ctx := t.Context()
	grant := func(holder string, d int32) *reconcilev1.CampaignLeaderResponse {
		t.Helper()
		g, err := wc.CampaignLeader(ctx, &reconcilev1.CampaignLeaderRequest{Name: "fence-test", Holder: holder, LeaseSeconds: d})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a := grant("fence-test/a", 1)
	if !a.GetLeader() {
		t.Fatalf("not granted: %+v", a)
	}
	if _, err := wc.CampaignLeader(ctx, &reconcilev1.CampaignLeaderRequest{Name: "someone-else", Holder: "fence-test/a"}); err == nil {
		t.Fatal("a worker campaigned for another's lease")
	}
	hdr := func(epoch int64) []string {
		return []string{fence.HeaderLease, "fence-test", fence.HeaderEpoch, fmt.Sprint(epoch)}
	}
	body := map[string]any{"name": "f1", "resource_type_name": "Fenced", "resource_type_version": "v1", "spec": map[string]any{}}
	do(t, http.MethodPost, "/api/v1/resources", body, hdr(a.GetEpoch())...).expect(t, http.StatusCreated)
	// b takes over once a's one-second lease lapses.
	var b *reconcilev1.CampaignLeaderResponse
	for deadline := time.Now().Add(10 * time.Second); ; {
		if b = grant("fence-test/b", 30); b.GetLeader() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no takeover: %+v", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b.GetEpoch() <= a.GetEpoch() {
		t.Fatalf("takeover %+v after %+v", b, a)
	}
	body["name"] = "f2"
	do(t, http.MethodPost, "/api/v1/resources", body, hdr(a.GetEpoch())...).expectError(t, http.StatusConflict, "stale_epoch")
	if n := countResources(t, "Fenced"); n != 1 {
		t.Fatalf("%d resources after a deposed leader's create", n)
	}
	do(t, http.MethodPost, "/api/v1/resources", body, hdr(b.GetEpoch())...).expect(t, http.StatusCreated)
	do(t, http.MethodPost, "/api/v1/resources", body, fence.HeaderLease, "fence-test", fence.HeaderEpoch, "x").
		expectError(t, http.StatusBadRequest, "invalid", "/fence/epoch")
}
