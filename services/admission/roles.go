package admission

import (
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/rbac"
)

// isRoleType reports whether r is a role or binding (rbac's built-in
// types): checked by rbac.Check, and needing no live reconciler, since no
// reconciler ever serves them.
func isRoleType(r *storev1.Resource) bool {
	return rbac.IsRoleType(r.GetResourceTypeName()) && r.GetResourceTypeVersion() == rbac.Version
}

// checkRole refuses a role or binding that rbac.Check finds wrong. Whether
// its writer may grant what it grants is the gateway's decision (it knows
// the writer).
func checkRole(r *storev1.Resource) error {
	if !isRoleType(r) {
		return nil
	}
	if errs := rbac.Check(r.GetResourceTypeName(), r.GetNamespace(), r.GetName(), r.GetSpec()); len(errs) > 0 {
		return problem.New(problem.Invalid, problem.CodeValidation, "%s %q is refused", r.GetResourceTypeName(), r.GetName()).WithFields(errs...)
	}
	return nil
}
