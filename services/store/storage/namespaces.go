package storage

// Namespaces: the rules every backend applies to them, and the one
// algorithm that finishes a namespace's deletion (FinalizeNamespace).
//
// A namespace is active until its deletion is requested; it is then
// terminating: nothing new is created in it, each of its resources is
// deleted through the normal path (deleting, its reconciler's cleanup, its
// finalizers removed, purged), and the namespace's row goes once none of
// its resources is left. Resources only leave a terminating namespace, so
// "empty" stays true once seen: the check needs no lock against creates
// beyond the one that keeps creates out once the namespace is terminating
// (each backend's; see CreateResource).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
)

// FinalizeBatch is how many resources of a terminating namespace
// FinalizeNamespace deletes per round.
const FinalizeBatch = 100

// DeleteNamespaceResult is the state after a namespace's deletion was
// requested or advanced.
type DeleteNamespaceResult struct {
	Namespace *resource.Namespace
	// Purged is true when the namespace is gone (none of its resources was
	// left).
	Purged bool
}

// NewNamespace validates the name of a namespace to create and returns
// the namespace to store: active, with a new uid. The backend gives it its
// revision and timestamps.
func NewNamespace(name string) (*resource.Namespace, error) {
	if fe := names.Namespace("/name", name); fe != nil {
		return nil, NewError(ErrInvalid, "invalid namespace").WithFields(fieldOf(fe)...)
	}
	return &resource.Namespace{Name: name, UID: uuid.NewString(), Status: resource.NamespaceActive}, nil
}

// NamespaceExists is the error of a create of a namespace that exists:
// ErrNameTaken, or ErrNamespaceTerminating while it is being deleted.
func NamespaceExists(cur *resource.Namespace) error {
	if cur.DeletedAt != nil {
		return NewError(ErrNamespaceTerminating, "namespace %q is being deleted; create it again once it is gone", cur.Name).
			WithFields(FieldError{Path: "/name", Message: "namespace is terminating"})
	}
	return NewError(ErrNameTaken, "namespace %q already exists", cur.Name).
		WithFields(FieldError{Path: "/name", Message: "already taken"})
}

// NamespaceNotFoundErr is ErrNotFound about a namespace asked for by name.
func NamespaceNotFoundErr(name string) error {
	return NotFound("namespace %q not found", name)
}

// CheckNamespace is the rule a create applies to its resource's namespace,
// read in the create's transaction: it must exist (ErrNamespaceNotFound,
// naming it) and be active (ErrNamespaceTerminating).
func CheckNamespace(name string, exists, terminating bool) error {
	switch {
	case !exists:
		return NewError(ErrNamespaceNotFound, "namespace %q does not exist: create it first (POST /api/v1/namespaces)", name).
			WithFields(FieldError{Path: "/namespace", Message: fmt.Sprintf("namespace %q does not exist", name)})
	case terminating:
		return NewError(ErrNamespaceTerminating, "namespace %q is being deleted: nothing new can be created in it", name).
			WithFields(FieldError{Path: "/namespace", Message: fmt.Sprintf("namespace %q is terminating", name)})
	}
	return nil
}

// CheckDeleteNamespace refuses the deletion of the default namespace.
func CheckDeleteNamespace(name string) error {
	if name == names.DefaultNamespace {
		return NewError(ErrNamespaceProtected, "namespace %q cannot be deleted: it always exists", name)
	}
	return nil
}

// MarkTerminating turns an active namespace terminating at now. It reports
// whether n changed (false when it was terminating already).
func MarkTerminating(n *resource.Namespace, now time.Time) bool {
	if n.DeletedAt != nil {
		return false
	}
	n.Status, n.DeletedAt, n.UpdatedAt = resource.NamespaceTerminating, &now, now
	return true
}

// OwnerUIDs are the uids r's owner references name that can name a
// resource (uids a backend generates: the others match nothing), without
// repeats: what a backend looks up for CheckOwners.
func OwnerUIDs(r *resource.Resource) []string {
	var out []string
	for _, o := range r.OwnerReferences {
		if _, err := uuid.Parse(o.UID); err == nil && !slices.Contains(out, o.UID) {
			out = append(out, o.UID)
		}
	}
	return out
}

// CheckOwners refuses owner references to resources in another namespace:
// an owner and the resources it owns share one namespace. namespaceOf maps
// the uids of the owners that exist to their namespaces; an owner that does
// not exist (yet, or any more) is left to garbage collection, as in
// Kubernetes.
func CheckOwners(r *resource.Resource, namespaceOf map[string]string) error {
	var errs []FieldError
	for i, o := range r.OwnerReferences {
		if ns, ok := namespaceOf[o.UID]; ok && ns != r.Namespace {
			errs = append(errs, FieldError{Path: fmt.Sprintf("/owner_references/%d/uid", i),
				Message: fmt.Sprintf("the owner is in namespace %q: owner references stay within the resource's namespace %q", ns, r.Namespace)})
		}
	}
	if len(errs) > 0 {
		return NewError(ErrInvalid, "owner references cross namespaces").WithFields(errs...)
	}
	return nil
}

// NamespaceSteps are a backend's parts of FinalizeNamespace.
type NamespaceSteps struct {
	// Live returns up to limit ids, ascending and above afterID, of the
	// namespace's resources that are not deleting yet.
	Live func(ctx context.Context, afterID int64, limit int) ([]int64, error)
	// Delete requests the deletion of one resource: the backend's
	// DeleteResource, the normal path.
	Delete func(ctx context.Context, id int64) error
	// Purge removes the namespace when it is terminating and none of its
	// resources is left, in one transaction, and returns the namespace as
	// it is (purged: as it was).
	Purge func(ctx context.Context) (*DeleteNamespaceResult, error)
}

// FinalizeNamespace advances the deletion of a terminating namespace: it
// requests the deletion of each of its resources that is not deleting yet,
// batch by batch, through the normal path (a DELETED event each, and PURGED
// at once for those without finalizers; reconcilers clean up the others and
// remove their finalizers), then removes the namespace if none of its
// resources is left. Backends call it after marking a namespace terminating
// and whenever asked again (the store's sweep): it is idempotent, and a
// crash at any point leaves a state from which the next call goes on.
func FinalizeNamespace(ctx context.Context, steps NamespaceSteps) (*DeleteNamespaceResult, error) {
	var after int64
	for {
		ids, err := steps.Live(ctx, after, FinalizeBatch)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			// A resource purged meanwhile is what we want.
			if err := steps.Delete(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("delete resource %d of a terminating namespace: %w", id, err)
			}
			after = id
		}
		if len(ids) < FinalizeBatch {
			return steps.Purge(ctx)
		}
	}
}
