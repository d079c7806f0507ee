package gateway

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
)

func listNames(t *testing.T, query string) ([]string, response) {
	t.Helper()
	r := do(t, http.MethodGet, "/api/v1/resources?"+query, nil).expect(t, http.StatusOK)
	docs := decode[[]resource.Resource](t, r)
	names := make([]string, 0, len(docs))
	for _, d := range docs {
		names = append(names, d.Name)
	}
	return names, r
}

func TestListPaginationAndFilters(t *testing.T) {
	createType(t, "Widget", "v1", `{"type":"object","properties":{"size":{"type":"integer"}}}`)
	createType(t, "Widget", "v2", `{"type":"object"}`)
	var want []string
	for i := range 7 {
		env := "prod"
		if i%2 == 1 {
			env = "dev"
		}
		labels := map[string]string{"env": env, "index": strconv.Itoa(i)}
		if i == 0 {
			labels["special"] = "yes"
		}
		name := fmt.Sprintf("widget-%d", i)
		createResource(t, map[string]any{"name": name, "resource_type_name": "Widget", "resource_type_version": "v1",
			"spec": map[string]any{"size": i}, "labels": labels})
		want = append(want, name)
	}
	createResource(t, map[string]any{"name": "widget-v2", "resource_type_name": "Widget", "resource_type_version": "v2", "spec": map[string]any{}})

	t.Run("pages", func(t *testing.T) {
		var got []string
		q := url.Values{"resource_type": {"Widget"}, "resource_type_version": {"v1"}, "limit": {"3"}}
		var rv string
		for page := 0; ; page++ {
			if page > 3 {
				t.Fatalf("too many pages")
			}
			names, r := listNames(t, q.Encode())
			got = append(got, names...)
			if v := r.Header.Get("X-Resource-Version"); v == "" {
				t.Fatalf("no X-Resource-Version")
			} else if rv == "" {
				rv = v
			} else if v != rv {
				t.Errorf("X-Resource-Version %s on page %d, first page had %s", v, page, rv)
			}
			tok := r.Header.Get("X-Continue-Token")
			if tok == "" {
				if len(names) != 1 {
					t.Errorf("last page has %d items, want 1", len(names))
				}
				break
			}
			if len(names) != 3 {
				t.Errorf("page %d has %d items, want 3", page, len(names))
			}
			q.Set("continue", tok)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("paged through %v, want %v", got, want)
		}
		if n, _ := strconv.ParseInt(rv, 10, 64); n < 0 {
			t.Errorf("X-Resource-Version %q", rv)
		}
	})
	t.Run("a single page has no continue token", func(t *testing.T) {
		names, r := listNames(t, "resource_type=Widget&limit=1000")
		if len(names) != 8 || r.Header.Get("X-Continue-Token") != "" {
			t.Fatalf("got %v, token %q", names, r.Header.Get("X-Continue-Token"))
		}
	})
	t.Run("filters", func(t *testing.T) {
		cases := []struct {
			query string
			want  []string
		}{
			{"resource_type=Widget&resource_type_version=v2", []string{"widget-v2"}},
			{"resource_type=Widget&label_selector=" + url.QueryEscape("env=prod"), []string{"widget-0", "widget-2", "widget-4", "widget-6"}},
			{"resource_type=Widget&label_selector=" + url.QueryEscape("env!=prod"), []string{"widget-1", "widget-3", "widget-5", "widget-v2"}},
			{"resource_type=Widget&label_selector=" + url.QueryEscape("env=dev,index in (1,5,6)"), []string{"widget-1", "widget-5"}},
			{"resource_type=Widget&label_selector=" + url.QueryEscape("index notin (0,1,2,3,4),env"), []string{"widget-5", "widget-6"}},
			{"resource_type=Widget&label_selector=special", []string{"widget-0"}},
			{"resource_type=Widget&label_selector=" + url.QueryEscape("!env"), []string{"widget-v2"}},
			{"resource_type=Widget&status=pending&label_selector=" + url.QueryEscape("index=3"), []string{"widget-3"}},
			{"resource_type=Widget&status=ready", []string{}},
			{"resource_type=NoSuchType", []string{}},
		}
		for _, tc := range cases {
			got, _ := listNames(t, tc.query)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: got %v, want %v", tc.query, got, tc.want)
			}
		}
		r := do(t, http.MethodGet, "/api/v1/resources?resource_type=NoSuchType", nil).expect(t, 200)
		if string(r.Body) != "[]" {
			t.Errorf("empty list body %s", r.Body)
		}
	})
	t.Run("bad queries", func(t *testing.T) {
		for _, q := range []string{"limit=0", "limit=1001", "limit=abc", "limit=-5", "limit=1.5"} {
			do(t, http.MethodGet, "/api/v1/resources?"+q, nil).expectError(t, 400, "invalid", "/limit")
		}
		// Keys and values no label can have are refused (issue 27), not
		// answered with an empty list.
		for _, sel := range []string{"env in (", "=x", "a b", "env,,x", "env==x==", strings.Repeat("k", 300) + "=v", "app>1", "app=é", "env in (prod,é)"} {
			do(t, http.MethodGet, "/api/v1/resources?label_selector="+url.QueryEscape(sel), nil).expectError(t, 400, "invalid", "/label_selector")
		}
		do(t, http.MethodGet, "/api/v1/resources?status=sleeping", nil).expectError(t, 400, "invalid", "/status")
		do(t, http.MethodGet, "/api/v1/resources?continue=garbage!", nil).expectError(t, 400, "invalid", "/continue")
		_, r := listNames(t, "resource_type=Widget&limit=2")
		tok := r.Header.Get("X-Continue-Token")
		do(t, http.MethodGet, "/api/v1/resources?resource_type=Other&limit=2&continue="+url.QueryEscape(tok), nil).expectError(t, 400, "invalid", "/continue")
		// A token whose revision was forged (issue 27): refused, not echoed
		// as X-Resource-Version.
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]any
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		for _, rev := range []int64{-1, 1_000_000_000_000} {
			fields["r"] = rev
			forged, _ := json.Marshal(fields)
			do(t, http.MethodGet, "/api/v1/resources?resource_type=Widget&limit=2&continue="+base64.RawURLEncoding.EncodeToString(forged), nil).
				expectError(t, 400, "invalid", "/continue")
		}
	})
}
