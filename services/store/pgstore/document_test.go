package pgstore_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
	"github.com/no8s/no8s/services/store/storage/storetest"
)

// TestListsServeStoredDocuments: every write stores the resource's document
// in its row, and a list of documents serves those bytes; a row without one
// (written before the column existed) or with an older one (changed by a
// store of the previous release during a rolling upgrade) is rendered from
// its columns, in its place on the page, whichever way the page is read.
func TestListsServeStoredDocuments(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	s := pgstore.New(pool, storage.Options{})
	pgstore.SetListProbe(s, 4)
	if _, err := s.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 12 {
		labels := map[string]string{"app": "web"}
		if i%3 == 0 {
			labels["tier"] = "db"
		}
		r, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			Name: fmt.Sprintf("w-%02d", i), ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
			Spec: json.RawMessage(`{"size":1,"zone":"a"}`), Labels: labels, Finalizers: []string{"example.com/hold"}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	// One write of each kind that changes a document.
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: ids[1], Spec: []byte(`{"size":2}`)}); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: ids[2], Holder: "worker-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: ids[2], LeaseEpoch: l.Epoch,
		Outcome: lifecycle.OutcomeSuccess, Outputs: json.RawMessage(`{"endpoint":"db:5432"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: ids[3], Holder: "worker-a"}); err != nil {
		t.Fatal(err)
	}
	sl, err := s.BecomeScheduler(ctx, "scheduler-a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetCondition(ctx, sl.Epoch, ids[4], resource.Condition{Type: resource.ConditionReconcilerAvailable,
		Status: resource.ConditionFalse, Reason: "NoReconciler"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestReconcile(ctx, ids[5]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: ids[6]}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: ids[7], Remove: []string{"example.com/hold"}}); err != nil {
		t.Fatal(err)
	}
	var unstored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM resources WHERE document IS NULL`).Scan(&unstored); err != nil {
		t.Fatal(err)
	}
	if unstored != 0 {
		t.Fatalf("%d resources have no stored document after their writes", unstored)
	}
	check := func(what string) {
		t.Helper()
		for _, req := range []storage.ListResourcesRequest{{Limit: 5}, {Limit: 2, LabelSelector: "tier=db"}, {Limit: 1000}} {
			typed := storetest.ListAll(t, s, req)
			req.Documents = true
			docs := storetest.ListAll(t, s, req)
			if len(docs) != len(typed) {
				t.Fatalf("%s: %+v: %d documents for %d resources", what, req, len(docs), len(typed))
			}
			for i, d := range docs {
				if !storetest.SameJSON(d, typed[i]) {
					t.Errorf("%s: %+v: document %d is\n%s\nwant\n%s", what, req, i, d, typed[i])
				}
			}
		}
	}
	check("stored")

	// A store of the previous release, during a rolling upgrade, changes
	// rows without their documents: those are rendered from their columns.
	if _, err := pool.Exec(ctx, `UPDATE resources SET status = 'Failed', status_message = 'changed by an older store',
		resource_version = resource_version + 1000 WHERE id = ANY($1)`, []int64{ids[1], ids[8]}); err != nil {
		t.Fatal(err)
	}
	check("changed by an older store")
	var stale int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM resources WHERE document_version <> resource_version`).Scan(&stale); err != nil || stale != 2 {
		t.Fatalf("%d rows with an older document, want 2 (%v)", stale, err)
	}

	// Rows written before the column existed have none: rendered from
	// their columns, every other row's still served as stored.
	if _, err := pool.Exec(ctx, `UPDATE resources SET document = NULL WHERE id = ANY($1)`, []int64{ids[0], ids[2], ids[3], ids[9], ids[10]}); err != nil {
		t.Fatal(err)
	}
	check("some unstored")
	if _, err := pool.Exec(ctx, `UPDATE resources SET document = NULL`); err != nil {
		t.Fatal(err)
	}
	check("none stored")

	// A list serves the stored bytes as they are.
	marker := []byte(`{"id":` + fmt.Sprint(ids[11]) + `,"stored":true}`)
	if _, err := pool.Exec(ctx, `UPDATE resources SET document = $2, document_version = resource_version WHERE id = $1`, ids[11], marker); err != nil {
		t.Fatal(err)
	}
	docs := storetest.ListAll(t, s, storage.ListResourcesRequest{Limit: 1000, Documents: true})
	if !bytes.Equal(docs[len(docs)-1], marker) {
		t.Fatalf("the list shows %s, not the stored document %s", docs[len(docs)-1], marker)
	}
}
