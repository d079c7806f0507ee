package rbac

import (
	"slices"

	"github.com/no8s/no8s/services/internal/httpsource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// The built-in resource types of roles and bindings (created by the store's
// migrations), all of version Version.
const (
	RoleType               = "Role"
	RoleBindingType        = "RoleBinding"
	ClusterRoleType        = "ClusterRole"
	ClusterRoleBindingType = "ClusterRoleBinding"
	// Version is the version of all four.
	Version = "v1"
)

// ClusterNamespace is the namespace the objects of ClusterRole and
// ClusterRoleBinding live in: they are global, and one namespace keeps
// their names unique.
const ClusterNamespace = "default"

// The global kinds: objects of no namespace, named in rules as types.
const (
	KindResourceTypes = "resource-types"
	KindWebhooks      = "admission-webhooks"
	KindNamespaces    = "namespaces"
	KindTokens        = "tokens"
)

// Verbs.
const (
	VerbGet       = "get"
	VerbList      = "list"
	VerbWatch     = "watch"
	VerbCreate    = "create"
	VerbUpdate    = "update"
	VerbPatch     = "patch"
	VerbDelete    = "delete"
	VerbReconcile = "reconcile"
	VerbApprove   = "approve"
	// VerbBind lets a RoleBinding or ClusterRoleBinding name the role of
	// the rule's names without holding its rights.
	VerbBind = "bind"
	// VerbEscalate lets a Role or ClusterRole grant rights its writer does
	// not hold.
	VerbEscalate = "escalate"
	// VerbManageTokens lets the holder create, list and revoke the tokens
	// of other users and of service accounts (type KindTokens).
	VerbManageTokens = "manage-tokens"
	// Wildcard, as a verb, type or name, matches every one (as a type: every
	// type but the Protected ones).
	Wildcard = "*"
)

// Verbs are the verbs a rule may name, Wildcard aside.
var verbs = []string{VerbGet, VerbList, VerbWatch, VerbCreate, VerbUpdate, VerbPatch, VerbDelete,
	VerbReconcile, VerbApprove, VerbBind, VerbEscalate, VerbManageTokens}

// Verbs returns the verbs a rule may name, Wildcard aside.
func Verbs() []string { return append([]string(nil), verbs...) }

// Subject kinds.
const (
	// SubjectUser is a user by username: an OIDC user, or the owner of an
	// API token.
	SubjectUser = "User"
	// SubjectGroup is every member of a group (OIDC groups, token groups).
	SubjectGroup = "Group"
	// SubjectServiceAccount is a service account by name (its tokens'
	// owner is serviceaccount:<name>).
	SubjectServiceAccount = "ServiceAccount"
	// SubjectToken is one API token by id.
	SubjectToken = "Token"
)

// subjectKinds are the kinds of subject.
var subjectKinds = []string{SubjectUser, SubjectGroup, SubjectServiceAccount, SubjectToken}

// SubjectKinds returns the kinds of subject.
func SubjectKinds() []string { return append([]string(nil), subjectKinds...) }

// IsSubjectKind reports whether kind is a kind of subject.
func IsSubjectKind(kind string) bool { return slices.Contains(subjectKinds, kind) }

// ServiceAccountPrefix prefixes a service account's username.
const ServiceAccountPrefix = "serviceaccount:"

// Protected returns the types the wildcard type does not match: the global
// kinds and the built-in types that only administrators manage by default
// (registries, HTTP sources, roles and bindings).
func Protected() []string {
	return []string{KindResourceTypes, KindWebhooks, KindNamespaces, KindTokens,
		tenancy.RegistryType, httpsource.Type,
		RoleType, RoleBindingType, ClusterRoleType, ClusterRoleBindingType}
}

// IsProtected reports whether the wildcard type does not match typ.
func IsProtected(typ string) bool {
	switch typ {
	case KindResourceTypes, KindWebhooks, KindNamespaces, KindTokens,
		tenancy.RegistryType, httpsource.Type,
		RoleType, RoleBindingType, ClusterRoleType, ClusterRoleBindingType:
		return true
	}
	return false
}

// IsRoleType reports whether typ is one of the four types of roles and
// bindings: never dispatched to a reconciler, and needing no live one.
func IsRoleType(typ string) bool {
	switch typ {
	case RoleType, RoleBindingType, ClusterRoleType, ClusterRoleBindingType:
		return true
	}
	return false
}

// IsClusterScoped reports whether typ's objects are global (they live in
// ClusterNamespace and are authorized with no namespace).
func IsClusterScoped(typ string) bool {
	return typ == ClusterRoleType || typ == ClusterRoleBindingType
}

// Rule grants Verbs on Types, narrowed to Names and Namespaces when they
// are given.
type Rule struct {
	// Verbs are the verbs granted (Wildcard: all).
	Verbs []string `json:"verbs"`
	// Types are resource type names or global kinds (Wildcard: every type
	// that is not Protected).
	Types []string `json:"types"`
	// Names narrow the rule to objects of these names (empty, or naming
	// Wildcard: all, and requests over many).
	Names []string `json:"names,omitempty"`
	// Namespaces narrow a ClusterRole's rule to these namespaces (empty:
	// all, and global objects). A Role's rules may not name any.
	Namespaces []string `json:"namespaces,omitempty"`
}

// RoleSpec is the spec of a Role or ClusterRole.
type RoleSpec struct {
	Rules []Rule `json:"rules"`
}

// Subject is who a binding grants its role to.
type Subject struct {
	// Kind is SubjectUser, SubjectGroup, SubjectServiceAccount or
	// SubjectToken.
	Kind string `json:"kind"`
	// Name is the username, group, service account name or token id.
	Name string `json:"name"`
}

// RoleRef names a binding's role: a Role of the binding's namespace or a
// ClusterRole (a ClusterRoleBinding names only ClusterRoles). A ClusterRole
// named BuiltinPrefix+... is a built-in role.
type RoleRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// BindingSpec is the spec of a RoleBinding or ClusterRoleBinding.
type BindingSpec struct {
	RoleRef  RoleRef   `json:"roleRef"`
	Subjects []Subject `json:"subjects"`
}

// Request is what a caller asks to do.
type Request struct {
	Verb string
	// Type is a resource type's name or a global kind.
	Type string
	// Namespace is the object's namespace; "" for a global object, and
	// for a request over every namespace (a list or watch of all).
	Namespace string
	// Name is the object's name; "" for a request over many (list, watch,
	// create without a name).
	Name string
}
