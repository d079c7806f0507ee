// Package rbac is who may do what through the public API: the roles and
// bindings users declare as built-in resources (Role and RoleBinding in a
// namespace; ClusterRole and ClusterRoleBinding for every namespace and for
// the objects of no namespace: resource types, admission webhooks,
// namespaces and tokens), the built-in roles (admin, editor, viewer), and
// the evaluator the gateway asks for every request.
//
// A request is a verb on an object: its type (a resource type's name, or
// one of the global kinds), its namespace ("" for a global object) and its
// name. A rule grants verbs on types, optionally narrowed to names and (in
// a ClusterRole) to namespaces. A RoleBinding grants its role's rules in
// its own namespace; a ClusterRoleBinding grants its ClusterRole's rules in
// every namespace the rule names (all when it names none) and, when the rule
// names no namespace, on global objects. The wildcard type "*" matches the
// resource types users register, never the built-in types or global kinds
// that only administrators manage by default (Protected): those match only
// when named.
//
// Nothing is allowed unless a rule allows it; members of the group
// authn.GroupAdmins may do everything.
package rbac
