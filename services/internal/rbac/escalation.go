package rbac

import (
	"fmt"
	"slices"

	"github.com/no8s/no8s/services/internal/authn"
)

// Uncovered returns the requests of rules that pr may not make itself, in
// scope namespace (a Role's or RoleBinding's namespace; "" for a
// ClusterRole or ClusterRoleBinding, whose rules apply in the namespaces
// they name or everywhere): none when pr holds every right rules grant.
// A wildcard is held only as a wildcard.
func (p *Policy) Uncovered(pr *authn.Principal, namespace string, rules []Rule) []Request {
	var out []Request
	for _, r := range rules {
		scopes := []string{namespace}
		switch {
		case namespace != "" && len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, namespace):
			// A rule narrowed to other namespaces grants nothing in
			// namespace (as the evaluator's scopedRule.allows says).
			continue
		case namespace == "" && len(r.Namespaces) > 0:
			scopes = r.Namespaces
		}
		names := r.Names
		if len(names) == 0 {
			names = []string{""}
		}
		for _, ns := range scopes {
			for _, v := range r.Verbs {
				for _, t := range r.Types {
					for _, n := range names {
						req := Request{Verb: v, Type: t, Namespace: ns, Name: n}
						if !p.Allowed(pr, req) {
							out = append(out, req)
						}
					}
				}
			}
		}
	}
	return out
}

// MayWriteRole decides whether pr may create or change a Role (namespace
// its namespace) or ClusterRole (namespace "") of rules: it holds the
// escalate verb on the role's type and name, or every right the rules
// grant. The error says what it lacks.
func (p *Policy) MayWriteRole(pr *authn.Principal, typ, namespace, name string, rules []Rule) error {
	if p.Allowed(pr, Request{Verb: VerbEscalate, Type: typ, Namespace: namespace, Name: name}) {
		return nil
	}
	if missing := p.Uncovered(pr, namespace, rules); len(missing) > 0 {
		return &EscalationError{What: fmt.Sprintf("%s %q", typ, name), Missing: missing}
	}
	return nil
}

// MayBind decides whether pr may create or change a binding (typ, in
// namespace; "" for a ClusterRoleBinding) of ref: it holds the bind verb on
// the role, or every right the role grants. A role that does not exist
// can be bound only with the bind verb.
func (p *Policy) MayBind(pr *authn.Principal, namespace string, ref RoleRef) error {
	// bind on a ClusterRole is granted everywhere, or (for a RoleBinding)
	// in the binding's namespace.
	if p.Allowed(pr, Request{Verb: VerbBind, Type: ref.Kind, Namespace: namespace, Name: ref.Name}) {
		return nil
	}
	rules, ok := p.Role(ref.Kind, namespace, ref.Name)
	if !ok {
		return &EscalationError{What: fmt.Sprintf("%s %q", ref.Kind, ref.Name), NotFound: true}
	}
	if missing := p.Uncovered(pr, namespace, rules); len(missing) > 0 {
		return &EscalationError{What: fmt.Sprintf("%s %q", ref.Kind, ref.Name), Missing: missing, Binding: true}
	}
	return nil
}

// EscalationError is a refused role or binding: it would grant rights its
// writer does not hold.
type EscalationError struct {
	// What is the role written or bound.
	What string
	// Missing are (up to the first few of) the rights the writer lacks.
	Missing []Request
	// NotFound: the bound role does not exist (binding it needs bind).
	NotFound bool
	// Binding: the refused write is a binding.
	Binding bool
}

// Error says what was refused and the first rights missing.
func (e *EscalationError) Error() string {
	if e.NotFound {
		return fmt.Sprintf("%s does not exist: binding it needs the %s verb on it", e.What, VerbBind)
	}
	verb, act := VerbEscalate, "granting"
	if e.Binding {
		verb, act = VerbBind, "binding"
	}
	shown := e.Missing
	if len(shown) > 3 {
		shown = shown[:3]
	}
	msg := fmt.Sprintf("%s %s would grant rights you do not hold (it needs the %s verb, or every right it grants); missing:", act, e.What, verb)
	for _, r := range shown {
		msg += " " + r.String()
	}
	if len(e.Missing) > len(shown) {
		msg += fmt.Sprintf(" and %d more", len(e.Missing)-len(shown))
	}
	return msg
}

// String is r as "verb type[/name] in namespace" for messages.
func (r Request) String() string {
	s := r.Verb + " " + r.Type
	if r.Name != "" {
		s += "/" + r.Name
	}
	if r.Namespace == "" {
		return s + " (everywhere)"
	}
	return s + " in " + r.Namespace
}
