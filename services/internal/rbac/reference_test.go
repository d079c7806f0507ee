package rbac

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/no8s/no8s/services/internal/authn"
)

// This file checks the production authoriser against a reference written
// from the documented semantics (the package doc and the doc comments of
// types.go, builtin.go and escalation.go) by brute force: no production
// helper is used, only the exported data types (Rule, RoleSpec,
// BindingSpec, Subject, RoleRef, Request, Object). Every string below is a
// literal on purpose, so that a renamed constant cannot silently change
// what the reference means.

// refProtected is the documented Protected set: the global kinds, and the
// built-in types of registries, HTTP sources, roles and bindings. The
// wildcard type does not match them.
var refProtected = []string{
	"resource-types", "admission-webhooks", "namespaces", "tokens",
	"TenantRegistry", "HttpSource",
	"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
}

// refBuiltinRules returns the rules of a built-in ClusterRole as the doc
// comments of builtin.go describe them; ok is false when name is not a
// built-in role.
func refBuiltinRules(name string, reconcilerTypes func(string) []string) (rules []Rule, ok bool) {
	read := []string{"get", "list", "watch"}
	switch name {
	case "no8s:admin":
		// May do everything: every verb on every type, Protected or not.
		types := []string{"*"}
		types = append(types, refProtected...)
		return []Rule{{Verbs: []string{"*"}, Types: types}}, true
	case "no8s:editor":
		// Reads what the viewer reads; gets, lists, watches, creates,
		// updates, patches, deletes, reconciles and approves every
		// resource of a type that is not Protected. (The comment once
		// said "read everything but tokens and webhooks", which the
		// rules never granted: roles, bindings, registries and HTTP
		// sources are not read.)
		return []Rule{
			{Verbs: read, Types: []string{"*", "resource-types", "namespaces"}},
			{Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "reconcile", "approve"}, Types: []string{"*"}},
		}, true
	case "no8s:viewer":
		// Reads every resource of a type that is not Protected, the
		// resource types and the namespaces.
		return []Rule{{Verbs: read, Types: []string{"*", "resource-types", "namespaces"}}}, true
	}
	if strings.HasPrefix(name, "no8s:reconciler:") && len(name) > len("no8s:reconciler:") {
		// Every verb on the types the reconciler serves.
		types := reconcilerTypes(strings.TrimPrefix(name, "no8s:reconciler:"))
		if len(types) == 0 {
			return nil, true
		}
		return []Rule{{Verbs: []string{"*"}, Types: types}}, true
	}
	return nil, false
}

func refContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// refObject is a stored object with its spec decoded.
type refObject struct {
	Type, Namespace, Name string
	Role                  RoleSpec
	Binding               BindingSpec
}

// refPolicy is the reference's view of a policy: the objects, as a list.
type refPolicy struct {
	objs            []refObject
	reconcilerTypes func(string) []string
}

func newRefPolicy(t *testing.T, objs []Object, reconcilerTypes func(string) []string) *refPolicy {
	rp := &refPolicy{reconcilerTypes: reconcilerTypes}
	for _, o := range objs {
		ro := refObject{Type: o.Type, Namespace: o.Namespace, Name: o.Name}
		var err error
		switch o.Type {
		case "Role", "ClusterRole":
			err = json.Unmarshal(o.Spec, &ro.Role)
		case "RoleBinding", "ClusterRoleBinding":
			err = json.Unmarshal(o.Spec, &ro.Binding)
		}
		if err != nil {
			t.Fatal(err)
		}
		rp.objs = append(rp.objs, ro)
	}
	return rp
}

// refIsSubject reports whether subject s names principal pr: a User its
// username, unless that is a service account's (serviceaccount:<name>),
// which only a ServiceAccount subject of <name> names; a Token its token
// id; a Group one of its groups, and the group every caller is in.
func refIsSubject(s Subject, pr *authn.Principal) bool {
	isServiceAccount := strings.HasPrefix(pr.Username, "serviceaccount:")
	switch s.Kind {
	case "User":
		return pr.Username != "" && !isServiceAccount && s.Name == pr.Username
	case "ServiceAccount":
		return isServiceAccount && s.Name == strings.TrimPrefix(pr.Username, "serviceaccount:")
	case "Token":
		return pr.TokenID != "" && s.Name == pr.TokenID
	case "Group":
		return s.Name == "no8s:authenticated" || refContains(pr.Groups, s.Name)
	}
	return false
}

// roleOf returns the rules of the role a binding in namespace names, and
// whether it exists: a Role of that namespace, or a ClusterRole (built-in,
// or stored in namespace "default").
func (rp *refPolicy) roleOf(namespace string, ref RoleRef) ([]Rule, bool) {
	if ref.Kind == "ClusterRole" {
		if rules, ok := refBuiltinRules(ref.Name, rp.reconcilerTypes); ok {
			return rules, true
		}
	}
	for _, o := range rp.objs {
		if ref.Kind == "Role" && o.Type == "Role" && o.Namespace == namespace && o.Name == ref.Name {
			return o.Role.Rules, true
		}
		if ref.Kind == "ClusterRole" && o.Type == "ClusterRole" && o.Name == ref.Name {
			return o.Role.Rules, true
		}
	}
	return nil, false
}

// refRuleAllows reports whether rule, granted by a binding of bindingType in
// bindingNamespace, allows r.
func refRuleAllows(bindingType, bindingNamespace string, rule Rule, r Request) bool {
	// Scope. A RoleBinding grants in its own namespace only (and a rule
	// that names namespaces only in those). A ClusterRoleBinding grants
	// everywhere, global objects included, unless the rule names
	// namespaces: then only in those (never on global objects, never over
	// every namespace).
	if bindingType == "RoleBinding" {
		if r.Namespace != bindingNamespace {
			return false
		}
		if len(rule.Namespaces) > 0 && !refContains(rule.Namespaces, r.Namespace) {
			return false
		}
	} else {
		if len(rule.Namespaces) > 0 && (r.Namespace == "" || !refContains(rule.Namespaces, r.Namespace)) {
			return false
		}
	}
	// Verb: named, or the wildcard verb.
	if !refContains(rule.Verbs, r.Verb) && !refContains(rule.Verbs, "*") {
		return false
	}
	// Type: named, or the wildcard type when the type is not Protected.
	if !refContains(rule.Types, r.Type) && !(refContains(rule.Types, "*") && !refContains(refProtected, r.Type)) {
		return false
	}
	// Name: a rule naming no names, or the wildcard name, allows every
	// name (and requests over many); otherwise the request names one of
	// the rule's names.
	if len(rule.Names) == 0 || refContains(rule.Names, "*") {
		return true
	}
	return r.Name != "" && refContains(rule.Names, r.Name)
}

// allowed is the reference evaluator: administrators may do everything;
// otherwise some rule of some role bound to some subject pr is allows r.
func (rp *refPolicy) allowed(pr *authn.Principal, r Request) bool {
	if pr == nil {
		return false
	}
	if pr.Method == "none" || refContains(pr.Groups, "no8s:admins") {
		return true
	}
	for _, b := range rp.objs {
		if b.Type != "RoleBinding" && b.Type != "ClusterRoleBinding" {
			continue
		}
		bound := false
		for _, s := range b.Binding.Subjects {
			if refIsSubject(s, pr) {
				bound = true
			}
		}
		if !bound {
			continue
		}
		rules, _ := rp.roleOf(b.Namespace, b.Binding.RoleRef)
		for _, rule := range rules {
			if refRuleAllows(b.Type, b.Namespace, rule, r) {
				return true
			}
		}
	}
	return false
}

// atoms decomposes rules, in scope namespace (a Role's or RoleBinding's;
// "" for a ClusterRole or ClusterRoleBinding), into the requests they
// grant: verb × type × name (no names: "" for all) in each namespace of the
// scope. In a namespace scope a rule that names other namespaces grants
// nothing; in the global scope a rule applies in the namespaces it names,
// or everywhere ("").
func refAtoms(namespace string, rules []Rule) []Request {
	var out []Request
	for _, rule := range rules {
		var scopes []string
		switch {
		case namespace != "" && len(rule.Namespaces) > 0 && !refContains(rule.Namespaces, namespace):
			scopes = nil
		case namespace != "":
			scopes = []string{namespace}
		case len(rule.Namespaces) > 0:
			scopes = rule.Namespaces
		default:
			scopes = []string{""}
		}
		names := rule.Names
		if len(names) == 0 {
			names = []string{""}
		}
		for _, ns := range scopes {
			for _, v := range rule.Verbs {
				for _, typ := range rule.Types {
					for _, n := range names {
						out = append(out, Request{Verb: v, Type: typ, Namespace: ns, Name: n})
					}
				}
			}
		}
	}
	return out
}

// holdsAll reports whether pr holds every right rules grant in scope
// namespace.
func (rp *refPolicy) holdsAll(pr *authn.Principal, namespace string, rules []Rule) bool {
	for _, a := range refAtoms(namespace, rules) {
		if !rp.allowed(pr, a) {
			return false
		}
	}
	return true
}

// The generator's universes: small, so that names collide often.
var (
	genRuleTypes  = []string{"A", "B", "TenantRegistry", "resource-types", "tokens", "Role", "ClusterRole", "*"}
	genVerbs      = append(Verbs(), "*")
	genNamespaces = []string{"a", "b", "default"}
	genNames      = []string{"x", "y"}
	genUsers      = []string{"alice", "bob", "serviceaccount:ci", "serviceaccount:alice", ""}
	genGroups     = []string{"g1", "g2"}
	genTokens     = []string{"t1", "t2"}
	genRoles      = []string{"r1", "r2"}
	genCluster    = []string{"r1", "c1", "c2"}
	genBuiltins   = []string{"no8s:admin", "no8s:editor", "no8s:viewer", "no8s:reconciler:r1", "no8s:reconciler:r2", "no8s:reconciler:r3"}
)

// genReconcilerTypes are the types of the reconcilers r1, r2 and r3.
func genReconcilerTypes(rec string) []string {
	switch rec {
	case "r1":
		return []string{"A"}
	case "r2":
		return []string{"B", "TenantRegistry"}
	}
	return nil
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// some returns up to max distinct elements of xs (at least min).
func some(rng *rand.Rand, xs []string, min, max int) []string {
	n := min + rng.IntN(max-min+1)
	var out []string
	for _, i := range rng.Perm(len(xs)) {
		if len(out) == n {
			break
		}
		out = append(out, xs[i])
	}
	return out
}

func genRule(rng *rand.Rand, narrowNamespaces bool) Rule {
	r := Rule{Verbs: some(rng, genVerbs, 1, 3), Types: some(rng, genRuleTypes, 1, 3)}
	switch rng.IntN(6) {
	case 0, 1:
		r.Names = some(rng, genNames, 1, 2)
	case 2:
		r.Names = []string{"*"}
	}
	if narrowNamespaces && rng.IntN(3) == 0 {
		r.Namespaces = some(rng, genNamespaces, 1, 2)
	}
	return r
}

func genRules(rng *rand.Rand, narrowNamespaces bool) []Rule {
	var rules []Rule
	for n := 1 + rng.IntN(3); n > 0; n-- {
		rules = append(rules, genRule(rng, narrowNamespaces))
	}
	return rules
}

func genSubjects(rng *rand.Rand) []Subject {
	var out []Subject
	for n := 1 + rng.IntN(2); n > 0; n-- {
		switch rng.IntN(4) {
		case 0:
			out = append(out, Subject{"User", pick(rng, []string{"alice", "bob", "ci", "serviceaccount:ci"})})
		case 1:
			out = append(out, Subject{"ServiceAccount", pick(rng, []string{"ci", "alice"})})
		case 2:
			out = append(out, Subject{"Token", pick(rng, genTokens)})
		default:
			out = append(out, Subject{"Group", pick(rng, []string{"g1", "g2", "no8s:authenticated"})})
		}
	}
	return out
}

func genObject(t *testing.T, typ, ns, name string, spec any) Object {
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return Object{Type: typ, Namespace: ns, Name: name, Spec: b}
}

// genPolicy returns random valid roles and bindings (as admission admits
// them): Roles name no namespaces, ClusterRoles and ClusterRoleBindings
// live in "default", a ClusterRoleBinding binds a ClusterRole, and no
// stored role takes a built-in name. Names are unique per type and
// namespace.
func genPolicy(t *testing.T, rng *rand.Rand) []Object {
	var objs []Object
	for _, ns := range genNamespaces {
		for _, name := range genRoles {
			if rng.IntN(3) == 0 {
				objs = append(objs, genObject(t, "Role", ns, name, RoleSpec{Rules: genRules(rng, false)}))
			}
		}
	}
	for _, name := range genCluster {
		if rng.IntN(2) == 0 {
			objs = append(objs, genObject(t, "ClusterRole", "default", name, RoleSpec{Rules: genRules(rng, true)}))
		}
	}
	clusterRef := func() RoleRef {
		if rng.IntN(3) == 0 {
			return RoleRef{"ClusterRole", pick(rng, genBuiltins)}
		}
		return RoleRef{"ClusterRole", pick(rng, append(genCluster, "missing"))}
	}
	for i, n := 0, rng.IntN(6); i < n; i++ {
		ref := clusterRef()
		if rng.IntN(2) == 0 {
			ref = RoleRef{"Role", pick(rng, append(genRoles, "missing"))}
		}
		objs = append(objs, genObject(t, "RoleBinding", pick(rng, genNamespaces), fmt.Sprintf("rb%d", i),
			BindingSpec{RoleRef: ref, Subjects: genSubjects(rng)}))
	}
	for i, n := 0, rng.IntN(3); i < n; i++ {
		objs = append(objs, genObject(t, "ClusterRoleBinding", "default", fmt.Sprintf("crb%d", i),
			BindingSpec{RoleRef: clusterRef(), Subjects: genSubjects(rng)}))
	}
	rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	return objs
}

func genPrincipal(rng *rand.Rand) *authn.Principal {
	pr := &authn.Principal{Username: pick(rng, genUsers), Groups: some(rng, genGroups, 0, 2), Method: authn.MethodOIDC}
	if rng.IntN(2) == 0 {
		pr.Method = authn.MethodToken
		pr.TokenID = pick(rng, genTokens)
	}
	switch rng.IntN(40) {
	case 0:
		pr.Groups = append(pr.Groups, "no8s:admins")
	case 1:
		pr.Method = authn.MethodNone
	}
	return pr
}

func genRequest(rng *rand.Rand) Request {
	r := Request{
		Verb:      pick(rng, Verbs()),
		Type:      pick(rng, genRuleTypes[:len(genRuleTypes)-1]),
		Namespace: pick(rng, append(genNamespaces, "")),
		Name:      pick(rng, append(genNames, "")),
	}
	// Now and then a wildcard atom, as Uncovered asks.
	switch rng.IntN(20) {
	case 0:
		r.Verb = "*"
	case 1:
		r.Type = "*"
	case 2:
		r.Name = "*"
	}
	return r
}

func dumpPolicy(objs []Object) string {
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "\t%s %s/%s %s\n", o.Type, o.Namespace, o.Name, o.Spec)
	}
	return b.String()
}

// Each test generates refPolicies policies, each from its own seed (logged
// on failure), with refPrincipals principals for each.
const (
	refPolicies   = 2000
	refPrincipals = 4
	refRequests   = 5 // per principal, for Allowed
)

var refSeed = flag.Uint64("rbac.seed", 0, "run the reference property tests on this seed only (as a failure reports it)")

// refSeeds calls f with the seeds of a test whose seeds start at base, or
// with -rbac.seed only.
func refSeeds(base uint64, f func(seed uint64)) {
	if *refSeed != 0 {
		f(*refSeed)
		return
	}
	for i := uint64(0); i < refPolicies; i++ {
		f(base + i)
	}
}

// TestAuthoriserMatchesBruteForceReference checks Allowed against the
// reference on random policies, principals and requests, and that
// AllowedAnywhere holds for the verb and type of every allowed request
// (and for the wildcard type).
func TestAuthoriserMatchesBruteForceReference(t *testing.T) {
	checks := 0
	refSeeds(0x6e6f3873, func(seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0))
		objs := genPolicy(t, rng)
		p, errs := NewPolicy(objs, genReconcilerTypes)
		if len(errs) > 0 {
			t.Fatalf("seed %d: %v", seed, errs)
		}
		rp := newRefPolicy(t, objs, genReconcilerTypes)
		for range refPrincipals {
			pr := genPrincipal(rng)
			for range refRequests {
				r := genRequest(rng)
				checks++
				got, want := p.Allowed(pr, r), rp.allowed(pr, r)
				if got != want {
					t.Fatalf("seed %d (-rbac.seed=%[1]d): Allowed(%+v, %+v) = %v, reference says %v; policy:\n%s", seed, *pr, r, got, want, dumpPolicy(objs))
				}
				if got && (!p.AllowedAnywhere(pr, r.Verb, r.Type) || !p.AllowedAnywhere(pr, r.Verb, "*")) {
					t.Fatalf("seed %d (-rbac.seed=%[1]d): %+v may %+v but AllowedAnywhere(%q, %q) = %v, (%q, *) = %v; policy:\n%s", seed, *pr, r,
						r.Verb, r.Type, p.AllowedAnywhere(pr, r.Verb, r.Type), r.Verb, p.AllowedAnywhere(pr, r.Verb, "*"), dumpPolicy(objs))
				}
			}
		}
	})
	if p, _ := NewPolicy(nil, nil); p.Allowed(nil, Request{Verb: "get", Type: "A"}) {
		t.Error("a nil principal was allowed")
	}
	t.Logf("%d checks of Allowed", checks)
}

// TestEscalationMatchesReference checks Uncovered, MayWriteRole and MayBind
// against the reference: a principal holds every right of rules in a scope
// when it may make every request the rules decompose into; it may write a
// role when it holds escalate on it or every right of its rules, and bind a
// role when it holds bind on it or (the role existing) every right of its
// rules in the binding's scope.
func TestEscalationMatchesReference(t *testing.T) {
	checks := 0
	refSeeds(0x6e6f3873<<8, func(seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0))
		objs := genPolicy(t, rng)
		p, errs := NewPolicy(objs, genReconcilerTypes)
		if len(errs) > 0 {
			t.Fatalf("seed %d: %v", seed, errs)
		}
		rp := newRefPolicy(t, objs, genReconcilerTypes)
		for range refPrincipals {
			pr := genPrincipal(rng)

			// Uncovered and MayWriteRole: a Role in a namespace (whose
			// rules name no namespaces), or a ClusterRole ("") whose
			// rules may; now and then rules naming namespaces in a
			// namespace's scope, as MayBind asks of a ClusterRole bound
			// by a RoleBinding.
			ns := pick(rng, append(genNamespaces, ""))
			rules := genRules(rng, ns == "" || rng.IntN(3) == 0)
			typ, roleNS, name := "ClusterRole", "", pick(rng, genCluster)
			if ns != "" {
				typ, roleNS, name = "Role", ns, pick(rng, genRoles)
			}
			checks++
			missing := p.Uncovered(pr, ns, rules)
			if want := rp.holdsAll(pr, ns, rules); (len(missing) == 0) != want {
				t.Fatalf("seed %d (-rbac.seed=%[1]d): Uncovered(%+v, %q, %+v) = %v, reference holds all: %v; policy:\n%s", seed, *pr, ns, rules, missing, want, dumpPolicy(objs))
			}
			checks++
			err := p.MayWriteRole(pr, typ, roleNS, name, rules)
			want := rp.allowed(pr, Request{Verb: "escalate", Type: typ, Namespace: roleNS, Name: name}) || rp.holdsAll(pr, ns, rules)
			if (err == nil) != want {
				t.Fatalf("seed %d (-rbac.seed=%[1]d): MayWriteRole(%+v, %s %q/%q, %+v) = %v, reference may: %v; policy:\n%s", seed, *pr, typ, roleNS, name, rules, err, want, dumpPolicy(objs))
			}

			// MayBind: a RoleBinding in a namespace of a Role or
			// ClusterRole, or a ClusterRoleBinding ("") of a ClusterRole.
			bns := pick(rng, append(genNamespaces, ""))
			ref := RoleRef{"ClusterRole", pick(rng, append(append(genCluster, "missing"), genBuiltins...))}
			if bns != "" && rng.IntN(2) == 0 {
				ref = RoleRef{"Role", pick(rng, append(genRoles, "missing"))}
			}
			checks++
			err = p.MayBind(pr, bns, ref)
			roleRules, exists := rp.roleOf(bns, ref)
			want = rp.allowed(pr, Request{Verb: "bind", Type: ref.Kind, Namespace: bns, Name: ref.Name}) ||
				(exists && rp.holdsAll(pr, bns, roleRules))
			if (err == nil) != want {
				t.Fatalf("seed %d (-rbac.seed=%[1]d): MayBind(%+v, %q, %+v) = %v, reference may: %v; policy:\n%s", seed, *pr, bns, ref, err, want, dumpPolicy(objs))
			}
		}
	})
	t.Logf("%d checks of Uncovered, MayWriteRole and MayBind", checks)
}
