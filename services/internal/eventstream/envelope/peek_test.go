package envelope

import (
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
)

func encoded(t testing.TB, name string, spec string) []byte {
	t.Helper()
	r := &resource.Resource{ID: 7, UID: "u", Namespace: "team-a", Name: name, ResourceTypeName: "Routed", ResourceTypeVersion: "v1",
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
