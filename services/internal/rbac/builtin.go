package rbac

import "strings"

// BuiltinPrefix prefixes the names of the built-in ClusterRoles: a name no
// resource can take, so a binding's roleRef cannot be confused with one.
const BuiltinPrefix = "no8s:"

// The built-in ClusterRoles.
const (
	// RoleAdmin may do everything (the group authn.GroupAdmins holds it).
	RoleAdmin = BuiltinPrefix + "admin"
	// RoleEditor may read what RoleViewer may (every resource of a type
	// that is not Protected, the resource types and the namespaces), and
	// create, update, patch, delete, reconcile and approve every resource
	// of a type that is not Protected.
	RoleEditor = BuiltinPrefix + "editor"
	// RoleViewer may read every resource of a type that is not Protected,
	// the resource types and the namespaces.
	RoleViewer = BuiltinPrefix + "viewer"
	// ReconcilerRolePrefix names the role of one reconciler
	// (no8s:reconciler:<name>): every verb on the types it serves, as the
	// live reconciler registry says.
	ReconcilerRolePrefix = BuiltinPrefix + "reconciler:"
)

// GroupAuthenticated is a group every authenticated caller is in: a binding
// to it grants a role to everyone who has a credential.
const GroupAuthenticated = BuiltinPrefix + "authenticated"

// readVerbs are the verbs that read.
var readVerbs = []string{VerbGet, VerbList, VerbWatch}

// builtinRole returns the rules of the built-in ClusterRole name; ok is
// false when there is none of that name. reconcilerTypes gives the types a
// reconciler serves.
func builtinRole(name string, reconcilerTypes func(string) []string) ([]Rule, bool) {
	switch name {
	case RoleAdmin:
		return []Rule{{Verbs: []string{Wildcard}, Types: append([]string{Wildcard}, Protected()...)}}, true
	case RoleEditor:
		return []Rule{
			{Verbs: []string{VerbGet, VerbList, VerbWatch, VerbCreate, VerbUpdate, VerbPatch, VerbDelete, VerbReconcile, VerbApprove}, Types: []string{Wildcard}},
			{Verbs: readVerbs, Types: []string{KindResourceTypes, KindNamespaces}},
		}, true
	case RoleViewer:
		return []Rule{{Verbs: readVerbs, Types: []string{Wildcard, KindResourceTypes, KindNamespaces}}}, true
	}
	if rec, ok := strings.CutPrefix(name, ReconcilerRolePrefix); ok && rec != "" {
		var types []string
		if reconcilerTypes != nil {
			types = reconcilerTypes(rec)
		}
		if len(types) == 0 {
			return nil, true
		}
		return []Rule{{Verbs: []string{Wildcard}, Types: types}}, true
	}
	return nil, false
}

// IsBuiltinRole reports whether name is a built-in ClusterRole's.
func IsBuiltinRole(name string) bool {
	_, ok := builtinRole(name, nil)
	return ok
}
