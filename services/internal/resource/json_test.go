package resource

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// reflectMarshal is what Marshal produced before AppendJSON: encoding/json
// without HTML escaping.
func reflectMarshal(t testing.TB, v any) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// tricky are strings every escaping rule applies to.
var tricky = []string{"", "plain", `quote " and \ backslash`, "<html> & 'x'", "line\nbreak\ttab\r\b\f", "\x00\x01\x1f\x7f",
	"ünïcödé ✓ 😀", "\u2028 and \u2029", "bad utf8 \xff\xfe end", "\xed\xa0\x80 surrogate half", "é\xc3"}

func randomResource(rng *rand.Rand) *Resource {
	pick := func() string { return tricky[rng.IntN(len(tricky))] }
	loc := time.FixedZone("X", 3600*(rng.IntN(5)-2))
	tm := func() time.Time {
		return time.Date(2000+rng.IntN(40), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(3)*rng.IntN(1e9), loc)
	}
	r := &Resource{ID: rng.Int64(), UID: pick(), Namespace: pick(), Name: pick(), ResourceTypeName: pick(), ResourceTypeVersion: pick(),
		Status: pick(), StatusMessage: pick(), Generation: rng.Int64N(100), ObservedGeneration: -rng.Int64N(3),
		ResourceVersion: rng.Int64(), Phase: pick(), CreatedAt: tm(), UpdatedAt: tm()}
	if rng.IntN(4) > 0 {
		r.Labels = map[string]string{}
		for range rng.IntN(8) {
			r.Labels[pick()+pick()] = pick()
		}
	}
	if rng.IntN(4) > 0 {
		r.Annotations = map[string]string{pick(): pick()}
	}
	if rng.IntN(4) > 0 {
		r.OwnerReferences = []OwnerReference{}
		for range rng.IntN(3) {
			r.OwnerReferences = append(r.OwnerReferences, OwnerReference{UID: pick(), ResourceTypeName: pick(), ResourceTypeVersion: pick(),
				Name: pick(), Controller: rng.IntN(2) == 0, BlockOwnerDeletion: rng.IntN(2) == 0})
		}
	}
	specs := []string{`{}`, `{"a": 1, "b" : [true, null, "x\u00e9"], "c": {"d": 1.5e3}}`, `{"html":"<&>"}`, " \n{\"s\":\"\\u2028\"} "}
	if rng.IntN(5) > 0 {
		r.Spec = json.RawMessage(specs[rng.IntN(len(specs))])
	}
	if rng.IntN(5) > 0 {
		r.Outputs = json.RawMessage(specs[rng.IntN(len(specs))])
	}
	if rng.IntN(4) > 0 {
		r.Conditions = []Condition{}
		for range rng.IntN(4) {
			c := Condition{Type: pick(), Status: pick(), ObservedGeneration: rng.Int64N(9), LastTransitionTime: tm()}
			if rng.IntN(2) == 0 {
				c.Reason, c.Message = pick(), pick()
			}
			r.Conditions = append(r.Conditions, c)
		}
	}
	if rng.IntN(4) > 0 {
		r.Finalizers = []string{}
		for range rng.IntN(3) {
			r.Finalizers = append(r.Finalizers, pick())
		}
	}
	if rng.IntN(2) == 0 {
		d := tm()
		r.DeletedAt = &d
	}
	if rng.IntN(2) == 0 {
		l := tm().UTC()
		r.LastReconcileTime = &l
	}
	return r
}

// TestAppendJSONMatchesEncodingJSON: the renderer writes the same bytes as
// encoding/json for resources with every kind of string, nil and empty
// collections, times in other zones, and specs in non-canonical notation.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		r := randomResource(rng)
		want, err := reflectMarshal(t, r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AppendJSON(nil, r)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("resource %d (ok %v):\n got %s\nwant %s", i, ok, got, want)
		}
		viaMarshal, err := Marshal(r)
		if err != nil || !bytes.Equal(viaMarshal, want) {
			t.Fatalf("Marshal: %v\n got %s\nwant %s", err, viaMarshal, want)
		}
	}
}

// TestAppendJSONRefusesWhatEncodingJSONRefuses: Marshal reports the same
// errors as before for documents encoding/json cannot render.
func TestAppendJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for name, r := range map[string]*Resource{
		"spec not JSON":   {Spec: json.RawMessage(`{"a":`)},
		"empty spec":      {Spec: json.RawMessage{}},
		"outputs garbage": {Outputs: json.RawMessage(`nope`)},
		"year 10000":      {CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"condition year":  {Conditions: []Condition{{LastTransitionTime: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}},
	} {
		if _, ok := AppendJSON(nil, r); ok {
			t.Errorf("%s: rendered", name)
		}
		_, want := reflectMarshal(t, r)
		if _, err := Marshal(r); err == nil || want == nil {
			t.Errorf("%s: Marshal error %v, encoding/json error %v", name, err, want)
		}
	}
}

// FuzzAppendString: every string is escaped as encoding/json escapes it.
func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := reflectMarshal(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}

func BenchmarkMarshalResource(b *testing.B) {
	r := randomResource(rand.New(rand.NewPCG(3, 4)))
	r.Spec = json.RawMessage(`{"backup_retention_days":14,"engine":"postgres","engine_version":"16.2","high_availability":true,"instance_class":"db.large","replicas":2,"storage_gb":500}`)
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := reflectMarshal(b, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
