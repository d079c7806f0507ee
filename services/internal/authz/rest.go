package authz

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/httpsource"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// The REST half of the policy: what the gateway holds its REST writes to
// once identities are on. A request on the gateway's service listener
// carries the identity of its client certificate (HTTPCaller); one on the
// public listener, or from the queue input, carries none (anonymous).
//
//   - The fence headers (X-No8s-Fence-Lease, X-No8s-Fence-Epoch) are
//     registry-sync's: from any other caller the request is refused
//     before anything runs (REST.Fence).
//   - The reserved keys (Reserved) are written only by the identities the
//     table names: a write that adds, changes or removes one its caller
//     may not write is refused, except that removing a reserved finalizer
//     stays allowed, the break-glass of a stuck deletion (REST.Keys),
//     unless the rule is Strict (the propagation finalizers: only the
//     garbage collector removes them).

// KeyKind is where on a resource a reserved key lives.
type KeyKind string

// The kinds of key.
const (
	Finalizer  KeyKind = "finalizer"
	Label      KeyKind = "label"
	Annotation KeyKind = "annotation"
)

// ReservedKey is a prefix of keys that only some identities may write
// through the REST API.
type ReservedKey struct {
	// Prefix starts every key of the rule.
	Prefix string
	// Kinds are where the rule applies.
	Kinds []KeyKind
	// Services are the service identities allowed, by name.
	Services []string
	// Reconcilers are the reconciler identities allowed, by name.
	Reconcilers []string
	// Own gives each key to the reconciler the rest of the key names
	// (reconciler.no8s.io/<name> to reconciler/<name>).
	Own bool
	// Exact makes the rule reserve the key Prefix itself, not every key it
	// starts.
	Exact bool
	// Strict refuses the removal of a reserved finalizer too: no
	// break-glass.
	Strict bool
	// Why says what the keys mean, for the security guide's table.
	Why string
}

// Reserved returns the table of reserved keys, in the order the security
// guide shows it; every call returns a new one.
func Reserved() []ReservedKey {
	return []ReservedKey{
		{Prefix: names.ReconcilerFinalizerPrefix, Kinds: []KeyKind{Finalizer}, Own: true,
			Why: "a reconciler's finalizer holds a deletion until that reconciler has cleaned up; removing one stays allowed (break-glass for a stuck deletion)"},
		{Prefix: tenancy.KeyPrefix, Kinds: []KeyKind{Label, Annotation}, Services: []string{identity.RegistrySync}, Reconcilers: []string{tenancy.Reconciler},
			Why: "which registry, template and Tenant a resource belongs to, and children created once: the tenant reconciler lists, adopts and deletes by them"},
		{Prefix: httpsource.KeyPrefix, Kinds: []KeyKind{Label, Annotation}, Services: []string{identity.RegistrySync},
			Why: "which HttpSource manages a resource and what it last applied: registry-sync prunes and rewrites by them"},
		{Prefix: lifecycle.FinalizerForeground, Kinds: []KeyKind{Finalizer}, Services: []string{identity.Scheduler}, Exact: true, Strict: true,
			Why: "a foreground deletion: added only by DELETE ?propagation_policy=Foreground; the garbage collector (in the scheduler) removes it once no dependent blocks its owner's deletion"},
		{Prefix: lifecycle.FinalizerOrphan, Kinds: []KeyKind{Finalizer}, Services: []string{identity.Scheduler}, Exact: true, Strict: true,
			Why: "an orphaning deletion: added only by DELETE ?propagation_policy=Orphan; the garbage collector (in the scheduler) removes it once no dependent names its owner"},
	}
}

// Writers lists who may write key under the rule, as the security guide
// and the refusals name them.
func (k ReservedKey) Writers(key string) string {
	var out []string
	if k.Own {
		name := strings.TrimPrefix(key, k.Prefix)
		if name == "" || name == key {
			name = "<name>"
		}
		out = append(out, string(identity.Reconciler)+"/"+name)
	}
	for _, r := range k.Reconcilers {
		out = append(out, string(identity.Reconciler)+"/"+r)
	}
	for _, s := range k.Services {
		out = append(out, string(identity.Service)+"/"+s)
	}
	return strings.Join(out, ", ")
}

// allows reports whether id (nil: anonymous) may write key under the rule.
func (k ReservedKey) allows(id *identity.ID, key string) bool {
	switch {
	case id == nil:
		return false
	case id.Kind == identity.Service:
		return slices.Contains(k.Services, id.Name)
	case id.Kind == identity.Reconciler:
		return slices.Contains(k.Reconcilers, id.Name) || k.Own && key == k.Prefix+id.Name
	}
	return false
}

// reservedFor is the rule reserving key of kind, if any.
func reservedFor(table []ReservedKey, kind KeyKind, key string) (ReservedKey, bool) {
	for _, k := range table {
		if slices.Contains(k.Kinds, kind) && (key == k.Prefix || !k.Exact && strings.HasPrefix(key, k.Prefix)) {
			return k, true
		}
	}
	return ReservedKey{}, false
}

// Keys are the parts of a resource that carry reserved keys.
type Keys struct {
	Finalizers  []string
	Labels      map[string]string
	Annotations map[string]string
}

// CheckKeys is the reserved keys' rule, a pure function: why caller (nil:
// anonymous) may not turn cur into next (cur is the zero Keys for a
// create), or "" when it may. Adding or changing a reserved label or
// annotation, adding a reserved finalizer, removing a reserved label or
// annotation, and removing a Strict rule's finalizer are refused to whoever
// the table does not name; keeping a reserved key as it is, and removing a
// reserved finalizer that is not Strict, are allowed to everyone.
func CheckKeys(caller *identity.ID, cur, next Keys) string {
	table := Reserved()
	var why []string
	refuse := func(kind KeyKind, key, what string) {
		k, ok := reservedFor(table, kind, key)
		if !ok || k.allows(caller, key) {
			return
		}
		why = append(why, fmt.Sprintf("%s may not %s the %s %q: only %s may write it", who(caller), what, kind, key, k.Writers(key)))
	}
	for _, f := range next.Finalizers {
		if !slices.Contains(cur.Finalizers, f) {
			refuse(Finalizer, f, "add")
		}
	}
	for _, f := range cur.Finalizers {
		if k, ok := reservedFor(table, Finalizer, f); ok && k.Strict && !slices.Contains(next.Finalizers, f) {
			refuse(Finalizer, f, "remove")
		}
	}
	for _, m := range []struct {
		kind      KeyKind
		cur, next map[string]string
	}{{Label, cur.Labels, next.Labels}, {Annotation, cur.Annotations, next.Annotations}} {
		for _, key := range slices.Sorted(maps.Keys(m.next)) {
			old, had := m.cur[key]
			switch {
			case !had:
				refuse(m.kind, key, "add")
			case old != m.next[key]:
				refuse(m.kind, key, "change")
			}
		}
		for _, key := range slices.Sorted(maps.Keys(m.cur)) {
			if _, kept := m.next[key]; !kept {
				refuse(m.kind, key, "remove")
			}
		}
	}
	return strings.Join(why, "; ")
}

// CheckFence is the fence headers' rule, a pure function: why caller (nil:
// anonymous) may not send them, or "" when it may. They are the leaders'
// that write through the API: registry-sync's and the scheduler's (its
// garbage collector).
func CheckFence(caller *identity.ID) string {
	if caller != nil && (caller.Is(identity.Service, identity.RegistrySync) || caller.Is(identity.Service, identity.Scheduler)) {
		return ""
	}
	return fmt.Sprintf("%s may not send %s or %s: fence headers are registry-sync's (service/%s) and the garbage collector's (service/%s), whose leader writes carry their lease's epoch",
		who(caller), fence.HeaderLease, fence.HeaderEpoch, identity.RegistrySync, identity.Scheduler)
}

// who names a caller in a refusal.
func who(caller *identity.ID) string {
	if caller == nil {
		return "an anonymous caller"
	}
	return caller.String()
}

// REST holds the gateway's REST writes to the rules above in a mode. A nil
// *REST is the gateway without identities: every method allows, as before
// identities existed.
type REST struct {
	mode Mode
	log  *slog.Logger
}

// NewREST returns the rules in mode, logging refusals (and, in AuditOnly,
// what would have been refused) to log.
func NewREST(mode Mode, log *slog.Logger) *REST {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &REST{mode: mode, log: log}
}

// Fence refuses a request carrying fence headers from anyone but
// registry-sync: a Forbidden problem, or nil in AuditOnly (logged).
func (g *REST) Fence(ctx context.Context) error {
	if g == nil {
		return nil
	}
	return g.deny(ctx, "fence", CheckFence(callerOf(ctx)))
}

// Keys refuses a write from cur to next (cur zero for a create) that
// changes a reserved key its caller may not write (CheckKeys).
func (g *REST) Keys(ctx context.Context, cur, next Keys) error {
	if g == nil {
		return nil
	}
	return g.deny(ctx, "reserved keys", CheckKeys(callerOf(ctx), cur, next))
}

func (g *REST) deny(ctx context.Context, rule, why string) error {
	if why == "" {
		return nil
	}
	id := who(callerOf(ctx))
	if g.mode == AuditOnly {
		g.log.WarnContext(ctx, "authz audit: would refuse", "identity", id, "rule", rule, "reason", why)
		return nil
	}
	g.log.InfoContext(ctx, "refused", "identity", id, "rule", rule, "reason", why)
	return problem.New(problem.Forbidden, problem.CodeDenied, "%s", why)
}

// callerOf is the caller in ctx, nil when anonymous.
func callerOf(ctx context.Context) *identity.ID {
	if id, ok := Caller(ctx); ok {
		return &id
	}
	return nil
}

// WithCaller returns ctx carrying id as its caller (Caller), for a caller
// authenticated outside gRPC: the gateway's service listener.
func WithCaller(ctx context.Context, id identity.ID) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{id: id})
}

// HTTPCaller returns r with its caller in its context: the identity of the
// client certificate of r's TLS connection, verified by a listener serving
// identity.Credentials.ServerTLS. An error when r came without one.
func HTTPCaller(r *http.Request) (*http.Request, error) {
	if r.TLS == nil {
		return nil, fmt.Errorf("the request did not come over TLS")
	}
	id, err := identity.PeerID(*r.TLS)
	if err != nil {
		return nil, err
	}
	return r.WithContext(WithCaller(r.Context(), id)), nil
}
