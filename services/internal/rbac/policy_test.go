package rbac

import (
	"encoding/json"
	"testing"

	"github.com/no8s/no8s/services/internal/authn"
)

func obj(t testing.TB, typ, ns, name string, spec any) Object {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return Object{Type: typ, Namespace: ns, Name: name, Spec: b}
}

// TestTeamEditsItsNamespace is the example of the docs: team A edits
// DatabaseClusters in namespace a, reads everything, and cannot touch
// webhooks or registries.
func TestTeamEditsItsNamespace(t *testing.T) {
	p, errs := NewPolicy([]Object{
		obj(t, RoleType, "a", "db-editor", RoleSpec{Rules: []Rule{{Verbs: []string{Wildcard}, Types: []string{"DatabaseCluster"}}}}),
		obj(t, RoleBindingType, "a", "team-a-db", BindingSpec{RoleRef: RoleRef{RoleType, "db-editor"}, Subjects: []Subject{{SubjectGroup, "team-a"}}}),
		obj(t, ClusterRoleBindingType, ClusterNamespace, "team-a-view", BindingSpec{RoleRef: RoleRef{ClusterRoleType, RoleViewer}, Subjects: []Subject{{SubjectGroup, "team-a"}}}),
	}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	alice := &authn.Principal{Username: "alice", Groups: []string{"team-a"}, Method: authn.MethodOIDC}
	bob := &authn.Principal{Username: "bob", Method: authn.MethodOIDC}
	for _, c := range []struct {
		who  *authn.Principal
		r    Request
		want bool
	}{
		{alice, Request{VerbCreate, "DatabaseCluster", "a", "x"}, true},
		{alice, Request{VerbDelete, "DatabaseCluster", "a", ""}, true},
		{alice, Request{VerbCreate, "DatabaseCluster", "b", "x"}, false},
		{alice, Request{VerbGet, "DatabaseCluster", "b", "x"}, true},
		{alice, Request{VerbList, "Queue", "", ""}, true},
		{alice, Request{VerbCreate, "Queue", "a", "q"}, false},
		{alice, Request{VerbList, KindWebhooks, "", ""}, false},
		{alice, Request{VerbGet, "TenantRegistry", "a", "r"}, false},
		{alice, Request{VerbCreate, KindResourceTypes, "", "x"}, false},
		{alice, Request{VerbGet, KindResourceTypes, "", "x"}, true},
		{bob, Request{VerbGet, "DatabaseCluster", "a", "x"}, false},
		{&authn.Principal{Username: "root", Groups: []string{authn.GroupAdmins}}, Request{VerbDelete, KindWebhooks, "", "w"}, true},
	} {
		if got := p.Allowed(c.who, c.r); got != c.want {
			t.Errorf("%s: %s = %v, want %v", c.who.Username, c.r, got, c.want)
		}
	}
	if err := p.MayBind(alice, "a", RoleRef{ClusterRoleType, RoleAdmin}); err == nil {
		t.Error("alice bound admin in her namespace")
	}
	if err := p.MayBind(alice, "a", RoleRef{RoleType, "db-editor"}); err != nil {
		t.Errorf("alice may bind a role she holds in her namespace: %v", err)
	}
	if err := p.MayWriteRole(alice, RoleType, "a", "more", []Rule{{Verbs: []string{VerbCreate}, Types: []string{"Queue"}}}); err == nil {
		t.Error("alice wrote a role granting more than she holds")
	}
}

func TestCheckRefusesBadRolesAndBindings(t *testing.T) {
	role := []byte(`{"rules":[{"verbs":["get","fly"],"types":["lower"],"namespaces":["a"]}]}`)
	if errs := Check(RoleType, "a", "r", role); len(errs) != 3 {
		t.Errorf("Check(role) = %v, want 3 errors (verb, type, namespaces)", errs)
	}
	crb := []byte(`{"roleRef":{"kind":"Role","name":"x"},"subjects":[{"kind":"Robot","name":""}]}`)
	if errs := Check(ClusterRoleBindingType, "b", "x", crb); len(errs) != 4 {
		t.Errorf("Check(crb) = %v, want 4 errors (namespace, kind, subject kind, subject name)", errs)
	}
	ok := []byte(`{"roleRef":{"kind":"ClusterRole","name":"no8s:viewer"},"subjects":[{"kind":"Group","name":"g"}]}`)
	if errs := Check(ClusterRoleBindingType, ClusterNamespace, "x", ok); len(errs) != 0 {
		t.Errorf("Check(ok) = %v", errs)
	}
}

// TestRuleNamesWildcardMatchesEveryName: Wildcard, as a name, matches
// every name (types.go), as an empty Names does; it used to match only an
// object named "*" (which no object can be), so the rule granted nothing.
func TestRuleNamesWildcardMatchesEveryName(t *testing.T) {
	p, errs := NewPolicy([]Object{
		obj(t, ClusterRoleType, ClusterNamespace, "any-a", RoleSpec{Rules: []Rule{{Verbs: []string{VerbGet, VerbList}, Types: []string{"A"}, Names: []string{Wildcard}}}}),
		obj(t, ClusterRoleBindingType, ClusterNamespace, "alice-any-a", BindingSpec{RoleRef: RoleRef{ClusterRoleType, "any-a"}, Subjects: []Subject{{SubjectUser, "alice"}}}),
	}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	alice := &authn.Principal{Username: "alice", Method: authn.MethodOIDC}
	for _, c := range []struct {
		r    Request
		want bool
	}{
		{Request{VerbGet, "A", "a", "x"}, true},
		{Request{VerbList, "A", "", ""}, true},
		{Request{VerbGet, "A", "b", Wildcard}, true},
		{Request{VerbDelete, "A", "a", "x"}, false},
		{Request{VerbGet, "B", "a", "x"}, false},
	} {
		if got := p.Allowed(alice, c.r); got != c.want {
			t.Errorf("%s = %v, want %v", c.r, got, c.want)
		}
	}
}
