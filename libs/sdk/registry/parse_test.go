package registry

import (
	"reflect"
	"testing"

	"github.com/no8s/no8s/libs/sdk"
)

// TestParseReplica: a replica's types may be objects or "Type/version"
// strings; malformed entries are dropped, a value without a name is no
// replica.
func TestParseReplica(t *testing.T) {
	rep, ok := parseReplica([]byte(`{"name":"noop","replica":"r1","types":[{"name":"A","version":"v1"},"B/v2","junk",7,{"version":"v1"}],"started_at":"2026-11-24T10:00:00Z"}`))
	if !ok {
		t.Fatal("refused a replica")
	}
	want := []sdk.TypeRef{{Name: "A", Version: "v1"}, {Name: "B", Version: "v2"}}
	if rep.Name != "noop" || rep.ID != "r1" || !reflect.DeepEqual(rep.Types, want) || rep.StartedAt.IsZero() {
		t.Fatalf("replica %+v, want noop/r1 with types %v", rep, want)
	}
	for _, bad := range []string{`{"replica":"r1"}`, `not json`, `[]`} {
		if _, ok := parseReplica([]byte(bad)); ok {
			t.Errorf("%s: accepted", bad)
		}
	}
}
