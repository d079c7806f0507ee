package pgstore_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

// TestListSelectorWalkThenIndex: a list whose selector has an equality
// walks a window of resources in id order, then, when the matches are rarer
// than that, takes the rest of the page from the labels' index. Whichever
// way a page is served, every page of every list (selective, broad, mixed
// with other filters, resources or documents) holds exactly the matching
// resources in id order, each once.
func TestListSelectorWalkThenIndex(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	s := pgstore.New(pool, storage.Options{})
	pgstore.SetListProbe(s, 40) // windows of max(40, 20 per item)
	for _, v := range []string{"v1", "v2"} {
		if _, err := s.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: v, Schema: []byte(`{"type":"object"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var all []*resource.Resource
	for i := range 600 {
		v := "v1"
		if i%4 == 3 {
			v = "v2"
		}
		labels := map[string]string{"team": "payments", "shard": fmt.Sprintf("s%d", i%97)}
		if i%7 == 0 {
			labels["tier"] = "db"
		}
		r, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			Name: fmt.Sprintf("r-%03d", i), ResourceTypeName: "Widget", ResourceTypeVersion: v, Spec: []byte(`{}`), Labels: labels}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	match := func(req storage.ListResourcesRequest, r *resource.Resource) bool {
		q, err := storage.ParseList(req)
		if err != nil {
			t.Fatal(err)
		}
		return (req.ResourceTypeVersion == "" || r.ResourceTypeVersion == req.ResourceTypeVersion) && q.Selector.Matches(r.Labels)
	}
	for _, req := range []storage.ListResourcesRequest{
		{LabelSelector: "shard=s5", Limit: 3},                                                         // selective: the index
		{LabelSelector: "shard=s5", Limit: 100},                                                       // selective, one page
		{LabelSelector: "team=payments", Limit: 50},                                                   // broad: the walk
		{LabelSelector: "tier=db", Limit: 4},                                                          // one in seven
		{LabelSelector: "tier=db,shard!=s0", Limit: 2, ResourceTypeName: "Widget"},                    // with a non-indexed requirement
		{LabelSelector: "shard=s10", Limit: 1, ResourceTypeName: "Widget", ResourceTypeVersion: "v2"}, // with the type
		{LabelSelector: "shard in (s1,s2),team=payments", Limit: 7},
		{LabelSelector: "shard=s42", Limit: 2, Documents: true},
		{LabelSelector: "shard=nothing", Limit: 5},
	} {
		var want []int64
		for _, r := range all {
			if match(req, r) {
				want = append(want, r.ID)
			}
		}
		var got []int64
		for page := 0; ; page++ {
			res, err := s.ListResources(ctx, req)
			if err != nil {
				t.Fatalf("%+v: %v", req, err)
			}
			for _, r := range res.Resources {
				got = append(got, r.ID)
			}
			for _, d := range res.Documents {
				var id int64
				if _, err := fmt.Sscanf(string(d), `{"id":%d,`, &id); err != nil {
					t.Fatalf("document %s: %v", d, err)
				}
				got = append(got, id)
			}
			if n := len(res.Resources) + len(res.Documents); n > req.Limit || (res.Continue != "" && n < req.Limit) {
				t.Fatalf("%+v: page %d holds %d items (continue %q)", req, page, n, res.Continue)
			}
			if res.Continue == "" {
				break
			}
			req.Continue = res.Continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("selector %q (type %s/%s): listed %v, want %v", req.LabelSelector, req.ResourceTypeName, req.ResourceTypeVersion, got, want)
		}
	}
}
