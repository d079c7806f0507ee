package rbac

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/problem"
)

// Check runs the checks of a role or binding that its schema cannot
// express, each error naming its field by JSON pointer: verbs are known;
// types are resource type names, global kinds or the wildcard; a Role's
// rules name no namespaces; subjects are of a known kind; a RoleBinding
// names a Role or ClusterRole, a ClusterRoleBinding a ClusterRole; a
// built-in role is one that exists; a ClusterRole or ClusterRoleBinding
// lives in ClusterNamespace, and none takes a built-in role's name.
func Check(typ, namespace, name string, spec []byte) []problem.FieldError {
	var errs []problem.FieldError
	add := func(path, format string, args ...any) {
		errs = append(errs, problem.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if IsClusterScoped(typ) && namespace != ClusterNamespace {
		add("/namespace", "a %s is global: it lives in namespace %q", typ, ClusterNamespace)
	}
	if strings.HasPrefix(name, BuiltinPrefix) {
		add("/name", "names starting %q are the built-in roles'", BuiltinPrefix)
	}
	switch typ {
	case RoleType, ClusterRoleType:
		var s RoleSpec
		if err := json.Unmarshal(spec, &s); err != nil {
			add("/spec", "not a role: %v", err)
			return errs
		}
		for i, r := range s.Rules {
			checkRule(add, fmt.Sprintf("/spec/rules/%d", i), r, typ == RoleType)
		}
	case RoleBindingType, ClusterRoleBindingType:
		var s BindingSpec
		if err := json.Unmarshal(spec, &s); err != nil {
			add("/spec", "not a binding: %v", err)
			return errs
		}
		checkRoleRef(add, typ, s.RoleRef)
		for i, sub := range s.Subjects {
			p := fmt.Sprintf("/spec/subjects/%d", i)
			if !IsSubjectKind(sub.Kind) {
				add(p+"/kind", "%q is not a subject kind: User, Group, ServiceAccount or Token", sub.Kind)
			}
			if strings.TrimSpace(sub.Name) == "" {
				add(p+"/name", "must not be empty")
			}
		}
	}
	return errs
}

// checkRule checks one rule at path.
func checkRule(add func(string, string, ...any), path string, r Rule, namespaced bool) {
	for j, v := range r.Verbs {
		if v != Wildcard && !slices.Contains(verbs, v) {
			add(fmt.Sprintf("%s/verbs/%d", path, j), "%q is not a verb: %s or %s", v, strings.Join(verbs, ", "), Wildcard)
		}
	}
	for j, t := range r.Types {
		if t == Wildcard || IsProtected(t) {
			continue
		}
		if fe := names.TypeName(fmt.Sprintf("%s/types/%d", path, j), t); fe != nil {
			add(fe.Path, "%q is neither a resource type name, a global kind (%s) nor %s", t,
				strings.Join([]string{KindResourceTypes, KindWebhooks, KindNamespaces, KindTokens}, ", "), Wildcard)
		}
	}
	if namespaced && len(r.Namespaces) > 0 {
		add(path+"/namespaces", "a Role's rules apply in its own namespace: only a ClusterRole's name namespaces")
	}
	for j, ns := range r.Namespaces {
		if fe := names.Namespace(fmt.Sprintf("%s/namespaces/%d", path, j), ns); fe != nil {
			add(fe.Path, "%s", fe.Message)
		}
	}
}

// checkRoleRef checks a binding's roleRef.
func checkRoleRef(add func(string, string, ...any), typ string, ref RoleRef) {
	switch {
	case ref.Kind != RoleType && ref.Kind != ClusterRoleType:
		add("/spec/roleRef/kind", "%q is not a role kind: %s or %s", ref.Kind, RoleType, ClusterRoleType)
	case typ == ClusterRoleBindingType && ref.Kind != ClusterRoleType:
		add("/spec/roleRef/kind", "a ClusterRoleBinding binds a ClusterRole")
	case strings.HasPrefix(ref.Name, BuiltinPrefix) && (ref.Kind != ClusterRoleType || !IsBuiltinRole(ref.Name)):
		add("/spec/roleRef/name", "%q is not a built-in role: %s, %s, %s or %s<reconciler>", ref.Name, RoleAdmin, RoleEditor, RoleViewer, ReconcilerRolePrefix)
	}
	if strings.TrimSpace(ref.Name) == "" {
		add("/spec/roleRef/name", "must not be empty")
	}
}
