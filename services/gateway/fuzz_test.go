package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

var fuzzResources atomic.Int64

// FuzzSpecRoundTrip: any spec that create accepts can afterwards be read,
// replaced (an equal spec is no change), patched and deleted, and reads back
// equal by value; any spec it refuses gets a 4xx and writes nothing. The
// seeds below and the corpus under testdata/fuzz/FuzzSpecRoundTrip (inputs
// that found bugs) run with every go test; go test -fuzz=FuzzSpecRoundTrip
// explores further.
func FuzzSpecRoundTrip(f *testing.F) {
	createType(f, "FuzzSpec", "v1", looseSchema)
	for _, seed := range []string{
		`{}`, `{"a":1}`, `{"n":1e2}`, `{"n":1e300}`, `{"n":-2.5e-300}`, `{"n":0.1,"m":-0}`, `{"s":"é😀<&>"}`,
		`{"a":{"b":[1,"x",null,true,{"c":[]}]}}`, `{"big":123456789012345678901234567890}`, `{"a":null}`,
		`{"name":"x","tags":["a","b"]}`, `{"esc":"\"\\\/\b\f\n\r\t\u00e9"}`, `{"k/~":1}`, `{"":0}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		name := fmt.Sprintf("fuzz-%d", fuzzResources.Add(1))
		body := `{"name":"` + name + `","resource_type_name":"FuzzSpec","resource_type_version":"v1","spec":` + spec + `}`
		byName := "/api/v1/resources/by-name/FuzzSpec/v1/" + name
		created := do(t, http.MethodPost, "/api/v1/resources", body)
		if created.Status != http.StatusCreated {
			if created.Status < 400 || created.Status >= 500 {
				t.Fatalf("create: status %d: %s", created.Status, created.Body)
			}
			do(t, http.MethodGet, byName, nil).expectError(t, http.StatusNotFound, "not_found")
			return
		}
		r := decode[resource.Resource](t, created)
		path := resourcePath(r)
		readBack := func(step string, want []byte) resource.Resource {
			t.Helper()
			got := decode[resource.Resource](t, do(t, http.MethodGet, path, nil).expect(t, http.StatusOK))
			if !strictjson.Equal(got.Spec, want) {
				t.Fatalf("%s: spec reads back as %s, want %s", step, got.Spec, want)
			}
			return got
		}
		readBack("create", []byte(spec))

		// Replacing with the same spec, as sent or as read, changes nothing.
		for _, same := range [][]byte{[]byte(spec), r.Spec} {
			got := decode[resource.Resource](t, do(t, http.MethodPut, path, `{"spec":`+string(same)+`}`).expect(t, http.StatusOK))
			if got.Generation != r.Generation || got.ResourceVersion != r.ResourceVersion {
				t.Fatalf("PUT of the same spec %s: generation %d→%d", same, r.Generation, got.Generation)
			}
		}

		// A merge patch adds one field.
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader([]byte(spec)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("an accepted spec does not decode: %v", err)
		}
		_, had := m["fuzz_extra"]
		m["fuzz_extra"] = json.Number("7")
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		patched := decode[resource.Resource](t, do(t, http.MethodPatch, path, `{"spec":{"fuzz_extra":7}}`, "Content-Type", "application/merge-patch+json").expect(t, http.StatusOK))
		readBack("patch", want)
		if !had && patched.Generation != r.Generation+1 {
			t.Fatalf("patch: generation %d, want %d", patched.Generation, r.Generation+1)
		}

		// Replacing restores the spec.
		do(t, http.MethodPut, path, `{"spec":`+spec+`}`).expect(t, http.StatusOK)
		readBack("replace", []byte(spec))

		do(t, http.MethodDelete, path, nil).expect(t, http.StatusAccepted)
		cleanupAndWaitGone(t, r)
	})
}
