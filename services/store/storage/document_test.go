package storage

import (
	"bytes"
	"encoding/json"
	"testing"
)

// storedJSON are values as jsonb's text form writes them (a space after
// every comma and colon) and as the store encodes them, with the strings
// that could trip a compactor: spaces, escaped quotes and backslashes,
// structural characters and escapes inside strings.
var storedJSON = []string{
	`{}`,
	`[]`,
	`{"a": 1, "b": [1, 2, {"c": null}], "d": true}`,
	`{"spaces": "a b  c", "colon, comma": ": , "}`,
	`{"quote": "say \"hi\" ", "backslash": "C:\\ ", "end": "\\"}`,
	`["\\\"", " \" ", "{[ ]}"]`,
	`{"unicode": "\u00e9 é \ud83d\ude00", "html": "<a> & </a>"}`,
	"{\n\t\"tabs\" :\r\n [ 1 ,2 ] }",
	`"a string alone"`,
	`12.5e-3`,
	`{"nested": {"deep": {"deeper": [[], [{}], " "]}}}`,
}

// TestStoredCompact: a stored value loses exactly the whitespace
// json.Compact removes.
func TestStoredCompact(t *testing.T) {
	for _, in := range storedJSON {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := CompactJSON([]byte(in)); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("CompactJSON(%s) = %s, want %s", in, got, want.Bytes())
		}
		if got := appendCompact([]byte("x"), []byte(in), "{}"); string(got) != "x"+want.String() {
			t.Errorf("appendCompact(%s) = %s, want x%s", in, got, want.Bytes())
		}
	}
	if got := appendCompact(nil, nil, "[]"); string(got) != "[]" {
		t.Errorf("appendCompact of no value = %s, want []", got)
	}
	if got := CompactJSON(nil); got != nil {
		t.Errorf("CompactJSON(nil) = %q, want nil", got)
	}
}

// FuzzStoredCompact: on any valid JSON the store's compactor and
// json.Compact agree.
func FuzzStoredCompact(f *testing.F) {
	for _, in := range storedJSON {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want bytes.Buffer
		if json.Compact(&want, in) != nil {
			return // not JSON: the store never reads such a value back
		}
		if got := appendStoredCompact(nil, in); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("appendStoredCompact(%q) = %q, json.Compact %q", in, got, want.Bytes())
		}
	})
}

// BenchmarkAppendDocument: one listed resource's document, its JSON
// columns in jsonb's text form.
func BenchmarkAppendDocument(b *testing.B) {
	d := DocumentFields{ID: 42, UID: "0b6f3c52-6f44-4d43-9a35-3c3b1f0c7f1e", Namespace: "default", Name: "list-0000042",
		TypeName: "DatabaseCluster", TypeVersion: "v1",
		Labels: []byte(`{"app": "db", "tier": "backend"}`), Annotations: []byte(`{}`), Owners: []byte(`[]`),
		Spec:       []byte(`{"engine": "postgres", "version": "16", "replicas": 3, "storage": {"size": "10Gi", "class": "fast"}}`),
		Status:     "Ready",
		Conditions: []byte(`[{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "", "observed_generation": 1}]`),
		Outputs:    []byte(`{}`), Finalizers: []byte(`[]`)}
	buf := make([]byte, 0, d.Size())
	b.ReportAllocs()
	for b.Loop() {
		buf = d.AppendDocument(buf[:0])
	}
}
