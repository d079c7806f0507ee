package rbac

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/no8s/no8s/services/internal/authn"
)

// Object is one stored Role, RoleBinding, ClusterRole or ClusterRoleBinding.
type Object struct {
	Type      string
	Namespace string
	Name      string
	Spec      json.RawMessage
}

// roleKey names a role: a Role by namespace and name, a ClusterRole by name
// with no namespace.
type roleKey struct{ namespace, name string }

// grant is one binding's role for one subject: in namespace (a
// RoleBinding's) or everywhere (a ClusterRoleBinding's, namespace "").
type grant struct {
	namespace string
	role      roleKey
}

// scopedRule is a rule in the scope of the binding that granted it.
type scopedRule struct {
	namespace string
	rule      Rule
}

// Policy is one immutable snapshot of every role and binding, and answers
// what a principal may do. Its zero value allows administrators only.
type Policy struct {
	roles           map[roleKey][]Rule
	grants          map[Subject][]grant
	reconcilerTypes func(string) []string
	// Read is when the objects were read (for bounding staleness).
	Read time.Time

	mu       sync.Mutex
	compiled map[string][]scopedRule
}

// maxCompiled bounds the principals whose rules one Policy remembers.
const maxCompiled = 10000

// NewPolicy builds a Policy of objs. An object whose spec does not parse is
// left out and reported (admission refuses such specs; one cannot stop the
// rest from applying). reconcilerTypes, which may be nil, gives the types a
// reconciler serves, for its built-in role.
func NewPolicy(objs []Object, reconcilerTypes func(string) []string) (*Policy, []error) {
	p := &Policy{roles: map[roleKey][]Rule{}, grants: map[Subject][]grant{}, reconcilerTypes: reconcilerTypes, compiled: map[string][]scopedRule{}}
	var errs []error
	for _, o := range objs {
		switch o.Type {
		case RoleType, ClusterRoleType:
			var spec RoleSpec
			if err := json.Unmarshal(o.Spec, &spec); err != nil {
				errs = append(errs, fmt.Errorf("%s %s/%s: %w", o.Type, o.Namespace, o.Name, err))
				continue
			}
			k := roleKey{o.Namespace, o.Name}
			if o.Type == ClusterRoleType {
				k.namespace = ""
			}
			p.roles[k] = spec.Rules
		case RoleBindingType, ClusterRoleBindingType:
			var spec BindingSpec
			if err := json.Unmarshal(o.Spec, &spec); err != nil {
				errs = append(errs, fmt.Errorf("%s %s/%s: %w", o.Type, o.Namespace, o.Name, err))
				continue
			}
			if o.Type == ClusterRoleBindingType && spec.RoleRef.Kind != ClusterRoleType {
				// Admission refuses it: a Role of one namespace granted
				// everywhere would be a grant nobody wrote.
				errs = append(errs, fmt.Errorf("%s %s: binds a %s", o.Type, o.Name, spec.RoleRef.Kind))
				continue
			}
			g := grant{namespace: o.Namespace, role: roleKey{o.Namespace, spec.RoleRef.Name}}
			if o.Type == ClusterRoleBindingType {
				g.namespace = ""
			}
			if spec.RoleRef.Kind == ClusterRoleType {
				g.role.namespace = ""
			}
			for _, s := range spec.Subjects {
				p.grants[s] = append(p.grants[s], g)
			}
		}
	}
	return p, errs
}

// Counts are the numbers of roles and of subject grants in p.
func (p *Policy) Counts() (roles, grants int) {
	for _, g := range p.grants {
		grants += len(g)
	}
	return len(p.roles), grants
}

// IsAdmin reports whether pr may do everything: a member of
// authn.GroupAdmins, or a caller of a gateway that authenticates nobody.
func IsAdmin(pr *authn.Principal) bool {
	return pr != nil && (pr.Method == authn.MethodNone || slices.Contains(pr.Groups, authn.GroupAdmins))
}

// Subjects are the subjects pr is: its user, service account, token and
// groups, and GroupAuthenticated.
func Subjects(pr *authn.Principal) []Subject {
	out := []Subject{{SubjectGroup, GroupAuthenticated}}
	if sa, ok := strings.CutPrefix(pr.Username, ServiceAccountPrefix); ok {
		out = append(out, Subject{SubjectServiceAccount, sa})
	} else if pr.Username != "" {
		out = append(out, Subject{SubjectUser, pr.Username})
	}
	if pr.TokenID != "" {
		out = append(out, Subject{SubjectToken, pr.TokenID})
	}
	for _, g := range pr.Groups {
		out = append(out, Subject{SubjectGroup, g})
	}
	return out
}

// Allowed reports whether pr may do r.
func (p *Policy) Allowed(pr *authn.Principal, r Request) bool {
	if IsAdmin(pr) {
		return true
	}
	if pr == nil || p == nil {
		return false
	}
	for _, sr := range p.rulesOf(pr) {
		if sr.allows(r) {
			return true
		}
	}
	return false
}

// AllowedAnywhere reports whether pr may do verb on typ (Wildcard: some
// type) in some namespace or on some name: whether a list or watch over
// many objects can return anything.
func (p *Policy) AllowedAnywhere(pr *authn.Principal, verb, typ string) bool {
	if IsAdmin(pr) {
		return true
	}
	if pr == nil || p == nil {
		return false
	}
	for _, sr := range p.rulesOf(pr) {
		if matchVerb(sr.rule.Verbs, verb) && (typ == Wildcard || matchType(sr.rule.Types, typ)) {
			return true
		}
	}
	return false
}

// rulesOf returns the rules granted to pr, compiled once per Policy.
func (p *Policy) rulesOf(pr *authn.Principal) []scopedRule {
	key := pr.Username + "\x00" + pr.TokenID + "\x00" + strings.Join(pr.Groups, "\x00")
	p.mu.Lock()
	rules, ok := p.compiled[key]
	p.mu.Unlock()
	if ok {
		return rules
	}
	for _, s := range Subjects(pr) {
		for _, g := range p.grants[s] {
			for _, r := range p.roleRules(g.role) {
				rules = append(rules, scopedRule{namespace: g.namespace, rule: r})
			}
		}
	}
	p.mu.Lock()
	if len(p.compiled) < maxCompiled {
		p.compiled[key] = rules
	}
	p.mu.Unlock()
	return rules
}

// roleRules returns the rules of the role k names (none when it does not
// exist).
func (p *Policy) roleRules(k roleKey) []Rule {
	if k.namespace == "" {
		if rules, ok := builtinRole(k.name, p.reconcilerTypes); ok {
			return rules
		}
	}
	return p.roles[k]
}

// Role returns the rules of a role: a Role of namespace, or (kind
// ClusterRoleType) a ClusterRole, built-in or stored; ok is false when
// there is none.
func (p *Policy) Role(kind, namespace, name string) ([]Rule, bool) {
	if kind == ClusterRoleType {
		if rules, ok := builtinRole(name, p.reconcilerTypes); ok {
			return rules, true
		}
		namespace = ""
	}
	rules, ok := p.roles[roleKey{namespace, name}]
	return rules, ok
}

// allows reports whether sr allows r. A namespaced grant allows requests
// in its namespace; a global one (a ClusterRoleBinding's) allows requests
// in the namespaces its rule names, or in every namespace and on global
// objects when it names none.
func (sr scopedRule) allows(r Request) bool {
	switch {
	case sr.namespace != "":
		if r.Namespace != sr.namespace || (len(sr.rule.Namespaces) > 0 && !slices.Contains(sr.rule.Namespaces, r.Namespace)) {
			return false
		}
	case len(sr.rule.Namespaces) > 0:
		if r.Namespace == "" || !slices.Contains(sr.rule.Namespaces, r.Namespace) {
			return false
		}
	}
	if !matchVerb(sr.rule.Verbs, r.Verb) || !matchType(sr.rule.Types, r.Type) {
		return false
	}
	// No names, or the wildcard name, match every name (and requests over
	// many, of no name).
	return len(sr.rule.Names) == 0 || slices.Contains(sr.rule.Names, Wildcard) ||
		(r.Name != "" && slices.Contains(sr.rule.Names, r.Name))
}

// matchVerb reports whether verbs grant verb.
func matchVerb(verbs []string, verb string) bool {
	return slices.Contains(verbs, Wildcard) || slices.Contains(verbs, verb)
}

// matchType reports whether types grant typ: named, or matched by the
// wildcard when typ is not Protected.
func matchType(types []string, typ string) bool {
	return slices.Contains(types, typ) || (!IsProtected(typ) && slices.Contains(types, Wildcard))
}
