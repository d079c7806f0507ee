package envelope

import (
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
)

func encoded(t testing.TB, name string, spec string) []byte {
	t.Helper()
	r := &resource.Resource{ID: 7, UID: "0b6c8d1e-3f4a-4b5c-8d9e-000000000007", Namespace: "team-a", Name: name, ResourceTypeName: "Routed", ResourceTypeVersion: "v1",
		Labels: map[string]string{"a": "b"}, Spec: []byte(spec)}
	b, err := Encode(Event{Revision: 42, Type: Modified, Resource: r, Timestamp: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// PeekName reads the resource's type, version and name, whatever comes
// around them, and refuses what is not an event.
func TestPeekName(t *testing.T) {
	big := `{"blob":"` + strings.Repeat("x", 600<<10) + `"}`
	for _, spec := range []string{`{}`, big} {
		n, err := PeekName(encoded(t, "routed-1", spec))
		if err != nil || n != (Name{TypeName: "Routed", TypeVersion: "v1", Namespace: "team-a", Name: "routed-1"}) {
			t.Fatalf("PeekName = %+v, %v", n, err)
		}
	}
	for _, bad := range [][]byte{nil, {0xff}, []byte("not protobuf at all"), encoded(t, "routed-1", `{}`)[:20]} {
		if n, err := PeekName(bad); err == nil {
			t.Fatalf("PeekName(%q) = %+v, want an error", bad, n)
		}
	}
}

func BenchmarkPeekName(b *testing.B) {
	data := encoded(b, "routed-1", `{"engine":"postgres","storage_gb":500,"replicas":2}`)
	for b.Loop() {
		if _, err := PeekName(data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzPeekName: PeekName never panics, and agrees with Decode on every
// input both accept.
func FuzzPeekName(f *testing.F) {
	f.Add(encoded(f, "routed-1", `{}`))
	f.Add([]byte{0x2a, 0x01, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := PeekName(data)
		d, derr := Decode(data)
		if err == nil && derr == nil && (d.ResourceName != n.Name || d.ResourceTypeName != n.TypeName || d.ResourceTypeVersion != n.TypeVersion || d.Namespace != n.Namespace) {
			t.Fatalf("PeekName %+v, Decode %q %q %q", n, d.ResourceTypeName, d.ResourceTypeVersion, d.ResourceName)
		}
	})
}

// DecodeHead reads what Decode reads but the document, labels and
// timestamp, and refuses what Decode refuses for the fields it reads.
func TestDecodeHead(t *testing.T) {
	r := &resource.Resource{ID: 7, UID: "u-1", Name: "c", ResourceTypeName: "Child", ResourceTypeVersion: "v1", Spec: []byte(`{"a":1}`),
		Labels:          map[string]string{"a": "b"},
		OwnerReferences: []resource.OwnerReference{{UID: "p-1", ResourceTypeName: "Parent", ResourceTypeVersion: "v1", Name: "p", Controller: true}}}
	for _, typ := range []string{Created, Modified, Deleted, Reconciled, Purged} {
		b, err := Encode(Event{Revision: 1 << 40, Type: typ, Resource: r, Timestamp: time.Unix(1, 0)})
		if err != nil {
			t.Fatal(err)
		}
		h, err := DecodeHead(b)
		want := Head{Revision: 1 << 40, Type: typ, ResourceID: 7, ResourceUID: "u-1", Namespace: "default", ResourceName: "c",
			ResourceTypeName: "Child", ResourceTypeVersion: "v1", ControllerUID: "p-1"}
		if err != nil || h != want {
			t.Fatalf("DecodeHead = %+v, %v\nwant %+v", h, err, want)
		}
	}
	for _, bad := range [][]byte{
		nil,                            // no event type
		{0x10, 0x09},                   // event type 9: unknown
		{0x10, 0x01, 0x22, 0x01, 0xff}, // a uid that is not UTF-8
		{0xff},
		{0x10, 0x01, 0x2a, 0x05, 'c'}, // a name longer than what is left
	} {
		if h, err := DecodeHead(bad); err == nil {
			t.Fatalf("DecodeHead(%x) = %+v, want an error", bad, h)
		}
		if _, err := Decode(bad); err == nil {
			t.Fatalf("Decode(%x) accepted what DecodeHead refused", bad)
		}
	}
}

func BenchmarkDecodeHead(b *testing.B) {
	data := encoded(b, "routed-1", `{"engine":"postgres","storage_gb":500,"replicas":2}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeHead(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	data := encoded(b, "routed-1", `{"engine":"postgres","storage_gb":500,"replicas":2}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeHead: DecodeHead never panics, accepts whatever Decode
// accepts, and agrees with it there.
func FuzzDecodeHead(f *testing.F) {
	f.Add(encoded(f, "routed-1", `{}`))
	f.Add([]byte{0x10, 0x01, 0x08, 0x05})
	f.Add([]byte{0x10, 0x01, 0x12, 0x00}) // the event type as bytes: unknown to both
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHead(data)
		d, derr := Decode(data)
		if derr != nil {
			return
		}
		if err != nil {
			t.Fatalf("Decode accepted, DecodeHead refused: %v", err)
		}
		if h != d.Head {
			t.Fatalf("DecodeHead %+v\nDecode     %+v", h, d.Head)
		}
	})
}

// An event carries its resource's controller uid: the controller
// reference's, not another owner's; none without one.
func TestControllerUID(t *testing.T) {
	owner := func(uid string, controller bool) resource.OwnerReference {
		return resource.OwnerReference{UID: uid, ResourceTypeName: "Parent", ResourceTypeVersion: "v1", Name: uid, Controller: controller}
	}
	for _, tc := range []struct {
		refs []resource.OwnerReference
		want string
	}{
		{nil, ""},
		{[]resource.OwnerReference{owner("a", false)}, ""},
		{[]resource.OwnerReference{owner("a", false), owner("b", true)}, "b"},
	} {
		r := &resource.Resource{ID: 7, UID: "u", Name: "c", ResourceTypeName: "Child", ResourceTypeVersion: "v1", OwnerReferences: tc.refs}
		b, err := Encode(Event{Revision: 1, Type: Created, Resource: r, Timestamp: time.Unix(1, 0)})
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decode(b)
		if err != nil || d.ControllerUID != tc.want {
			t.Fatalf("owners %+v: controller %q (%v), want %q", tc.refs, d.ControllerUID, err, tc.want)
		}
	}
}
