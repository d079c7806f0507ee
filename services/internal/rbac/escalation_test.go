package rbac

import (
	"testing"

	"github.com/no8s/no8s/services/internal/authn"
)

// TestUncoveredSkipsRulesNarrowedToOtherNamespaces: bound in namespace b, a
// ClusterRole whose rule names only namespace a grants nothing (the
// evaluator never applies it in b), so binding it there needs no rights.
// Uncovered used to ask for the rule's rights in b all the same.
func TestUncoveredSkipsRulesNarrowedToOtherNamespaces(t *testing.T) {
	rules := []Rule{{Verbs: []string{VerbDelete}, Types: []string{"A"}, Namespaces: []string{"a"}}}
	p, errs := NewPolicy([]Object{obj(t, ClusterRoleType, ClusterNamespace, "delete-a-in-a", RoleSpec{Rules: rules})}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	bob := &authn.Principal{Username: "bob", Method: authn.MethodOIDC}
	if missing := p.Uncovered(bob, "b", rules); len(missing) != 0 {
		t.Errorf("Uncovered in b = %v, want none", missing)
	}
	if err := p.MayBind(bob, "b", RoleRef{ClusterRoleType, "delete-a-in-a"}); err != nil {
		t.Errorf("binding in b a role that grants nothing there: %v", err)
	}
	if err := p.MayBind(bob, "a", RoleRef{ClusterRoleType, "delete-a-in-a"}); err == nil {
		t.Error("bob bound in a a role granting delete A there")
	}
	if err := p.MayBind(bob, "", RoleRef{ClusterRoleType, "delete-a-in-a"}); err == nil {
		t.Error("bob bound everywhere a role granting delete A in a")
	}
}
