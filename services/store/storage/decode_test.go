package storage

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
)

// FuzzStoredCollections: the fast paths decode exactly what encoding/json
// decodes, and fail exactly when it fails.
func FuzzStoredCollections(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": "b", "c": "d"}`, `{"a":"b","a":"c"}`, `{"k\"": "v"}`, `{"é": "\u00e9"}`, "{\"a\": \"\xff\"}",
		`[]`, ` [ ] `, `[{"type": "Ready", "reason": "Done", "status": "True", "message": "ok", "last_transition_time": "2026-11-25T10:00:00.123456Z", "observed_generation": 3}]`,
		`[{"type":"A","status":"False","observed_generation":-1,"last_transition_time":"2026-01-01T00:00:00+02:00"},{"type":"B","status":"True","observed_generation":0,"last_transition_time":"0001-01-01T00:00:00Z"}]`,
		`[{"type":"A","observed_generation":1.5}]`, `[{"Type":"A"}]`, `[{"type":"A",}]`, `[{"type":"A","last_transition_time":"yesterday"}]`, `[{}]`, `[{"observed_generation":012}]`, `[{"observed_generation":-0}]`, `[{"observed_generation":-}]`, `[{"observed_generation":}]`, `["x", "y"]`, `["a\\nb"]`, `[1]`, `{"a": 1}`, `null`, `{"a": "b",}`, `["a" "b"]`, `{"a": "b"} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 {
			return
		}
		var wantMap map[string]string
		werr := json.Unmarshal(raw, &wantMap)
		gotMap, gerr := decodeStringMap(raw)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(gotMap, wantMap) {
			t.Fatalf("map %q: got %#v %v, want %#v %v", raw, gotMap, gerr, wantMap, werr)
		}
		var wantList []string
		werr = json.Unmarshal(raw, &wantList)
		gotList, gerr := decodeStrings(raw)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(gotList, wantList) {
			t.Fatalf("list %q: got %#v %v, want %#v %v", raw, gotList, gerr, wantList, werr)
		}
		var wantConds []resource.Condition
		werr = json.Unmarshal(raw, &wantConds)
		var r resource.Resource
		gerr = StoredCollections{Conditions: raw}.Decode(&r)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(r.Conditions, wantConds) {
			t.Fatalf("conditions %q: got %#v %v, want %#v %v", raw, r.Conditions, gerr, wantConds, werr)
		}
	})
}
