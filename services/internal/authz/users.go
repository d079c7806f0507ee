package authz

import (
	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/platform/identity"
)

// The users service identities' writes are admitted as: what a validating
// webhook is told asks (its request's user), as Kubernetes names its own
// components system:kube-controller-manager and the like.
const (
	// SystemUserPrefix begins every service identity's user name.
	SystemUserPrefix = "system:no8s:"
	// ServicesGroup is the one group of every service identity's user.
	ServicesGroup = SystemUserPrefix + "services"
	// GarbageCollectorUser is the garbage collector's user: the
	// scheduler's identity writing under the collector's fenced lease.
	GarbageCollectorUser = SystemUserPrefix + fence.GarbageCollectorLease
)

// SystemUser is the user a write by id is admitted as, lease being the
// fenced lease the write carries ("" for none): GarbageCollectorUser for
// the scheduler under the collector's lease, system:no8s:<name> for
// another control plane service, system:no8s:<kind>:<name> for a
// reconciler or client identity.
func SystemUser(id identity.ID, lease string) string {
	switch {
	case id.Is(identity.Service, identity.Scheduler) && lease == fence.GarbageCollectorLease:
		return GarbageCollectorUser
	case id.Kind == identity.Service:
		return SystemUserPrefix + id.Name
	}
	return SystemUserPrefix + string(id.Kind) + ":" + id.Name
}
