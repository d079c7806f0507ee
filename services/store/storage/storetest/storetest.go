// Package storetest is the store's conformance suite: every backend of
// storage.Store and storage.EventLog runs it unchanged (in the spirit of
// Temporal's persistence tests), from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, o storage.Options) storage.Backend { ... })
//	}
//
// One subtest per rule, each on a fresh, empty, migrated backend, asserting
// real values through the interfaces only: revisions, generation,
// optimistic concurrency, finalizers and deletion, leases and fencing
// epochs, scheduler leadership, webhooks, lists, history bounds, the
// outbox's exactly-once order under concurrent writers and rollbacks, the
// database identity and revision bump of a stream rebuild, namespaces
// (names unique per namespace, lists and selectors per namespace, a
// namespace's deletion through its resources' finalizers), events (the
// Kubernetes kind), leader leases and fenced client writes, the built-in
// tenant types, and API tokens.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// Opener opens a fresh, empty, migrated backend with the given options. It
// closes the backend when t ends.
type Opener func(t *testing.T, o storage.Options) storage.Backend

// Run runs the whole suite against the backends open makes.
func Run(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Opener)
	}{
		{"ResourceLifecycle", testResourceLifecycle},
		{"DeleteWithoutFinalizersPurges", testDeleteWithoutFinalizersPurges},
		{"BadInputWritesNothing", testBadInputWritesNothing},
		{"DryRunWritesNothing", testDryRunWritesNothing},
		{"SpecValues", testSpecValues},
		{"GenerationRules", testGenerationRules},
		{"OptimisticConcurrency", testOptimisticConcurrency},
		{"ListPagingAndSelectors", testListPagingAndSelectors},
		{"ListStableAcrossWrites", testListStableAcrossWrites},
		{"ListDocumentsMatchResources", testListDocumentsMatchResources},
		{"TypeDeleteRacesCreates", testTypeDeleteRacesCreates},
		{"EveryWriteEmitsOneEventPerChange", testEveryWriteEmitsThroughTheCommitPath},
		{"WebhookCRUDAndSetVersion", testWebhookCRUDAndSetVersion},
		{"WebhookSetVersionUnderConcurrentWrites", testWebhookSetVersionUnderConcurrentWrites},
		{"LeaseExclusionAndFencing", testLeaseExclusionAndFencing},
		{"ActorLimitsLeasesAndCompletions", testActorLimitsLeasesAndCompletions},
		{"CompleteWritesEverythingInOneEvent", testCompleteWritesEverythingInOneEvent},
		{"FailuresTerminalRequeue", testFailuresTerminalRequeue},
		{"HistoryBoundAndPaging", testHistoryBoundAndPaging},
		{"DeletionCleanupPurges", testDeletionCleanupPurges},
		{"SchedulerLeadershipAndFencing", testSchedulerLeadershipAndFencing},
		{"SetConditionAndReconcilerAvailable", testSetConditionAndReconcilerAvailable},
		{"ReconcilePolicy", testReconcilePolicy},
		{"ReconcileStateFields", testReconcileStateFields},
		{"CompletionObservedAndDegraded", testCompletionObservedAndDegraded},
		{"CompletionTextRefused", testCompletionTextRefused},
		{"CompletionDependencies", testCompletionDependencies},
		{"LeaseRevision", testLeaseRevision},
		{"OutboxExactlyOnceInOrder", testOutboxExactlyOnceInOrder},
		{"RelayLockAndEpochFencing", testRelayLockAndEpochFencing},
		{"RelayPublishesExactlyTheCommittedChanges", testRelayPublishesExactlyTheCommittedChanges},
		{"RelayRepublishesALostTail", testRelayRepublishesALostTail},
		{"RelayRebasesWhenTheOutboxNoLongerHoldsTheLostTail", testRelayRebasesWhenTheOutboxNoLongerHoldsTheLostTail},
		{"RelayReportsARowCommittedBelowItsCursor", testRelayReportsARowCommittedBelowItsCursor},
		{"RelayPassesOverForeignMessages", testRelayPassesOverForeignMessages},
		{"OutboxKeepsTraceContext", testOutboxKeepsTraceContext},
		{"IdentityAndRevisionBump", testIdentityAndRevisionBump},
		{"NamespaceObjects", testNamespaceObjects},
		{"NamesUniquePerNamespace", testNamesUniquePerNamespace},
		{"ListPerNamespace", testListPerNamespace},
		{"NamespaceDeletionWithFinalizers", testNamespaceDeletionWithFinalizers},
		{"NamespaceDeleteRacesCreates", testNamespaceDeleteRacesCreates},
		{"OwnerReferencesStayInNamespace", testOwnerReferencesStayInNamespace},
		{"UpdateOwnerReferences", testUpdateOwnerReferences},
		{"DeletePropagation", testDeletePropagation},
		{"ListDependents", testListDependents},
		{"ListDangling", testListDangling},
		{"ListPropagating", testListPropagating},
		{"EventsDedupAndRetention", testEventsDedupAndRetention},
		{"CompletionCarriesEvents", testCompletionCarriesEvents},
		{"LeaderLeaseFencesClientWrites", testLeaderLeaseFencesClientWrites},
		{"BuiltinTenantTypes", testBuiltinTenantTypes},
		{"TokenCreateAndLookup", testTokenCreateAndLookup},
		{"TokenNames", testTokenNames},
		{"TokenListFilters", testTokenListFilters},
		{"TokenRevoke", testTokenRevoke},
		{"TokenBadInputWritesNothing", testTokenBadInputWritesNothing},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, open) })
	}
}

// newStore opens a backend with default options and returns its store and
// event log.
func newStore(t *testing.T, open Opener) (storage.Store, storage.EventLog) {
	t.Helper()
	b := open(t, storage.Options{})
	return b.Store, b.Log
}

const schemaJSON = `{"type":"object","properties":{"size":{"type":"integer"}}}`

func mustType(t *testing.T, s storage.Store, name, version string) *resource.Type {
	t.Helper()
	typ, err := s.CreateType(t.Context(), storage.CreateTypeRequest{Name: name, Version: version, Schema: []byte(schemaJSON)})
	if err != nil {
		t.Fatalf("create type: %v", err)
	}
	return typ
}

func mustCreate(t *testing.T, s storage.Store, name string, finalizers ...string) *resource.Resource {
	t.Helper()
	r, err := s.CreateResource(t.Context(), storage.CreateResourceRequest{Resource: resource.Resource{
		Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"size":1}`),
		Labels: map[string]string{"app": "web"}, Finalizers: finalizers,
	}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return r
}

// wantErr fails unless err is a store error wrapping want.
func wantErr(t *testing.T, err error, want error) {
	t.Helper()
	if se := storeErr(err); se == nil || !errors.Is(err, want) {
		t.Fatalf("got error %v (%#v), want %v", err, se, want)
	}
}

// storeErr returns the *storage.Error in err's chain, or nil.
func storeErr(err error) *storage.Error {
	var se *storage.Error
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// outboxRows returns every outbox row the log holds, by revision.
func outboxRows(t *testing.T, el storage.EventLog) []storage.OutboxRow {
	t.Helper()
	rows, err := el.ReadOutbox(t.Context(), 0, math.MaxInt64, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// countEvents is the number of outbox rows.
func countEvents(t *testing.T, el storage.EventLog) int { return len(outboxRows(t, el)) }

// events returns the event types of a resource's outbox rows in revision
// order.
func events(t *testing.T, el storage.EventLog, id int64) []string {
	t.Helper()
	var out []string
	for _, row := range outboxRows(t, el) {
		if row.ResourceID == id {
			out = append(out, row.EventType)
		}
	}
	return out
}

// allResources lists every resource, page by page.
func allResources(t *testing.T, s storage.Store) []*resource.Resource {
	t.Helper()
	var out []*resource.Resource
	next := ""
	for {
		page, err := s.ListResources(t.Context(), storage.ListResourcesRequest{Limit: storage.MaxListLimit, Continue: next})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Resources...)
		if next = page.Continue; next == "" {
			return out
		}
	}
}

// countResources is the number of resources.
func countResources(t *testing.T, s storage.Store) int { return len(allResources(t, s)) }

// lastRevision is the newest revision handed out so far.
func lastRevision(t *testing.T, el storage.EventLog) int64 {
	t.Helper()
	st, err := el.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.Revision
}

// leadRelay takes the relay lock and leadership, as a relay does; the
// caller releases the lock.
func leadRelay(t *testing.T, el storage.EventLog) (lock storage.RelayLock, epoch, cursor int64) {
	t.Helper()
	lock, err := el.LockRelay(t.Context())
	if err != nil || lock == nil {
		t.Fatalf("relay lock: %v %v", lock, err)
	}
	if epoch, cursor, err = lock.Lead(t.Context()); err != nil {
		lock.Release()
		t.Fatal(err)
	}
	return lock, epoch, cursor
}

// waitPast waits until the clock is past deadline (a lease's expiry),
// with a margin.
func waitPast(t *testing.T, deadline time.Time) {
	t.Helper()
	select {
	case <-time.After(time.Until(deadline) + 50*time.Millisecond):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond(t.Context()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}
func acquire(t *testing.T, s storage.Store, id int64, holder string) *storage.Lease {
	t.Helper()
	l, err := s.AcquireLease(t.Context(), storage.AcquireLeaseRequest{ResourceID: id, Holder: holder})
	if err != nil {
		t.Fatalf("acquire %d as %s: %v", id, holder, err)
	}
	return l
}
func complete(t *testing.T, s storage.Store, req storage.CompleteReconcileRequest) *storage.CompleteResult {
	t.Helper()
	res, err := s.CompleteReconcile(t.Context(), req)
	if err != nil {
		t.Fatalf("complete %+v: %v", req, err)
	}
	return res
}
