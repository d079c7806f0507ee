package rbac

import (
	"fmt"
	"testing"

	"github.com/no8s/no8s/services/internal/authn"
)

// BenchmarkAllowed is one decision for a service account bound by one of
// 200 bindings to one of 50 Roles (the api-roles bench's policy).
func BenchmarkAllowed(b *testing.B) {
	var objs []Object
	for i := range 50 {
		objs = append(objs, obj(b, RoleType, "default", fmt.Sprintf("role-%d", i), RoleSpec{Rules: []Rule{
			{Verbs: []string{VerbGet, VerbList}, Types: []string{fmt.Sprintf("Queue%d", i)}},
			{Verbs: []string{VerbCreate}, Types: []string{"DatabaseCluster"}},
		}}))
	}
	for i := range 200 {
		objs = append(objs, obj(b, RoleBindingType, "default", fmt.Sprintf("b-%d", i), BindingSpec{
			RoleRef: RoleRef{RoleType, fmt.Sprintf("role-%d", i%50)}, Subjects: []Subject{{SubjectServiceAccount, fmt.Sprintf("sa-%d", i)}}}))
	}
	p, _ := NewPolicy(objs, nil)
	pr := &authn.Principal{Username: "serviceaccount:sa-101", TokenID: "abc", Method: authn.MethodToken}
	r := Request{Verb: VerbCreate, Type: "DatabaseCluster", Namespace: "default", Name: "x"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !p.Allowed(pr, r) {
				b.Fatal("denied")
			}
		}
	})
}
