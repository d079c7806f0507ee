package storage

// Owner references: the reads the garbage collector makes
// (docs/design/relationships.md), and the one rule that says when an
// owner reference dangles.

import (
	"context"

	"github.com/no8s/no8s/services/internal/resource"
)

// DefaultOwnerPage is the page of ListDependents and ListDangling when the
// request names none, and MaxOwnerPage the most one may ask for.
const (
	DefaultOwnerPage = 500
	MaxOwnerPage     = 5000
)

// OwnerPage is limit as a page size: DefaultOwnerPage when limit <= 0, at
// most MaxOwnerPage.
func OwnerPage(limit int) int {
	if limit <= 0 {
		return DefaultOwnerPage
	}
	return min(limit, MaxOwnerPage)
}

// ListDependentsRequest asks for the resources whose owner references name
// OwnerUID, by ascending id after AfterID, at most Limit (OwnerPage).
type ListDependentsRequest struct {
	OwnerUID string
	AfterID  int64
	Limit    int
}

// ListDanglingRequest asks for the next page of the sweep: the resources
// that have owner references, by ascending id after AfterID, at most Limit
// of them scanned (OwnerPage), and of those the ones with a dangling owner
// reference.
type ListDanglingRequest struct {
	AfterID int64
	Limit   int
}

// Dangling is a resource with the owner references of it that dangle
// (DanglingRefs), in its own order.
type Dangling struct {
	Resource *resource.Resource
	Refs     []resource.OwnerReference
}

// DanglingPage is one page of the sweep. Next is the id to continue after
// (the last resource scanned), 0 when the sweep is over; a page may hold no
// Items and still have a Next.
type DanglingPage struct {
	Items []Dangling
	Next  int64
}

// OwnerStore is what a backend offers the garbage collector besides Store:
// reads through an index of owner references, from the store as it is now.
type OwnerStore interface {
	// ListDependents returns the resources whose owner references name
	// req.OwnerUID, by ascending id after req.AfterID, at most
	// OwnerPage(req.Limit): fewer means the last page.
	ListDependents(ctx context.Context, req ListDependentsRequest) ([]*resource.Resource, error)
	// ListDangling returns the next page of the sweep of every resource
	// with owner references: those of them with a dangling reference
	// (DanglingRefs), read in one snapshot with the owners they name.
	ListDangling(ctx context.Context, req ListDanglingRequest) (*DanglingPage, error)
	// ListPropagating returns the resources that are deleting and carry a
	// propagation finalizer (foregroundDeletion, orphan), by ascending id
	// after afterID, at most OwnerPage(limit): the owners whose deletion
	// the collector advances.
	ListPropagating(ctx context.Context, afterID int64, limit int) ([]*resource.Resource, error)
}

// OwnerIdentity is what an owner reference must match of a live resource:
// its uid, type, version and name.
type OwnerIdentity struct {
	UID, TypeName, TypeVersion, Name string
}

// IdentityOf is r's OwnerIdentity.
func IdentityOf(r *resource.Resource) OwnerIdentity {
	return OwnerIdentity{UID: r.UID, TypeName: r.ResourceTypeName, TypeVersion: r.ResourceTypeVersion, Name: r.Name}
}

// Dangles reports whether ref dangles given live, the resources found by the
// uids r's references name: no resource has its uid (the owner never
// existed, or was purged), or the one with it has another type, version or
// name. An owner that is deleting is live.
func Dangles(ref resource.OwnerReference, live map[string]OwnerIdentity) bool {
	o, ok := live[ref.UID]
	return !ok || o.TypeName != ref.ResourceTypeName || o.TypeVersion != ref.ResourceTypeVersion || o.Name != ref.Name
}

// DanglingRefs returns the owner references of r that dangle (Dangles), in
// r's order; nil when none does.
func DanglingRefs(r *resource.Resource, live map[string]OwnerIdentity) []resource.OwnerReference {
	var out []resource.OwnerReference
	for _, ref := range r.OwnerReferences {
		if Dangles(ref, live) {
			out = append(out, ref)
		}
	}
	return out
}

// OwnerUIDsOf are the uids the owner references of rs name that can name a
// resource (OwnerUIDs), without repeats: what a backend looks up for
// DanglingRefs.
func OwnerUIDsOf(rs []*resource.Resource) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		for _, u := range OwnerUIDs(r) {
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

// DanglingOf is the sweep's page over scanned (the resources with owner
// references, by ascending id, as many as the page asked for) and live (the
// owners found by OwnerUIDsOf(scanned)): the ones with a dangling
// reference, and Next, the last id scanned (0 when fewer than limit were
// scanned: the sweep is over).
func DanglingOf(scanned []*resource.Resource, live map[string]OwnerIdentity, limit int) *DanglingPage {
	page := &DanglingPage{}
	for _, r := range scanned {
		if refs := DanglingRefs(r, live); len(refs) > 0 {
			page.Items = append(page.Items, Dangling{Resource: r, Refs: refs})
		}
	}
	if len(scanned) >= limit && len(scanned) > 0 {
		page.Next = scanned[len(scanned)-1].ID
	}
	return page
}
