package resource

import (
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/api/names"
)

// TestMetadataSizeErrorPointsAtTheLargestPart shows that metadata over the
// combined limit is blamed on the part that holds most of it (issue 27: the
// annotations' excess pointed at /labels).
func TestMetadataSizeErrorPointsAtTheLargestPart(t *testing.T) {
	big := strings.Repeat("x", names.MaxMetadataBytes)
	for _, tc := range []struct {
		labels, annotations map[string]string
		owners              []OwnerReference
		want                string
	}{
		{nil, map[string]string{"note": big}, nil, "/annotations"},
		{map[string]string{"a": "b"}, map[string]string{"note": big}, nil, "/annotations"},
		{map[string]string{"app": "web"}, map[string]string{"n": "v"}, manyOwners(names.MaxMetadataBytes / 64), "/owner_references"},
	} {
		errs := ValidateMetadata(tc.labels, tc.annotations, tc.owners)
		found := false
		for _, e := range errs {
			if strings.Contains(e.Message, "more than the") {
				found = true
				if e.Path != tc.want {
					t.Errorf("size error at %s, want %s", e.Path, tc.want)
				}
			}
		}
		if !found {
			t.Errorf("no size error in %v", errs)
		}
	}
}

func manyOwners(n int) []OwnerReference {
	out := make([]OwnerReference, n)
	for i := range out {
		out[i] = OwnerReference{UID: "u", Name: "n", ResourceTypeName: "T", ResourceTypeVersion: "v1"}
	}
	return out
}
