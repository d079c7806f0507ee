package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/sdk"
)

// Bucket is the KV bucket's name (subjects.RegistryBucket; its key layout,
// TTL and heartbeat are there too).
const Bucket = subjects.RegistryBucket

// Sentinel errors.
var (
	// ErrTypeTaken: another reconciler serves one of the types.
	ErrTypeTaken = errors.New("registry: type is served by another reconciler")
	// ErrInvalid: a name, replica id or type is not usable in the registry.
	ErrInvalid = errors.New("registry: invalid registration")
)

var replicaRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ValidName checks a reconciler name by the resource name rule
// (names.Name: a DNS-1123 label), so that it is usable as finalizer
// suffix, consumer name and KV key.
func ValidName(name string) error {
	if fe := names.Name("reconciler name", name); fe != nil {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, fe.Path, fe.Message)
	}
	return nil
}

// ValidType checks a type reference by the type name and version rules
// (names.TypeName, names.TypeVersion).
func ValidType(t sdk.TypeRef) error {
	fe := names.TypeName("type name", t.Name)
	if fe == nil {
		fe = names.TypeVersion("type version", t.Version)
	}
	if fe != nil {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, fe.Path, fe.Message)
	}
	return nil
}

// ValidFinalizers checks the finalizers a reconciler declares beyond its own
// (names.DeclaredFinalizer: valid, and not under reconciler.no8s.io/).
func ValidFinalizers(list []string) error {
	for i, f := range list {
		if fe := names.DeclaredFinalizer(fmt.Sprintf("finalizers[%d]", i), f); fe != nil {
			return fmt.Errorf("%w: %s: %s", ErrInvalid, fe.Path, fe.Message)
		}
	}
	return nil
}

// typeKey is the key claiming type t.
func typeKey(t sdk.TypeRef) string { return subjects.TypeKey(t.Name, t.Version) }

// Replica is the value of a replica key.
type Replica struct {
	Name  string        `json:"name"`
	ID    string        `json:"replica"`
	Types []sdk.TypeRef `json:"types"`
	// Finalizers are the finalizers the reconciler owns beyond its own
	// reconciler.no8s.io/<name> (its action plugins'): every type claim
	// carries them, admission adds them to new resources, and the store
	// lets this reconciler, and no other, remove them.
	Finalizers []string `json:"finalizers,omitempty"`
	// Owns are the types the reconciler owns (an Engine's Owns), and
	// OwnsAny whether it owns every type (OwnsAnyType): the scheduler
	// reconciles a resource of the reconciler's types when one it controls
	// (its controller owner reference) of an owned type changes.
	Owns      []sdk.TypeRef `json:"owns,omitempty"`
	OwnsAny   bool          `json:"owns_any,omitempty"`
	StartedAt time.Time     `json:"started_at"`
	// LastHeartbeat is when the replica key was last written (its
	// heartbeat), as Live reads it; not part of the stored value.
	LastHeartbeat time.Time `json:"-"`
}

// Ensure returns the bucket, creating it (memory storage, max age ttl, one
// value per key) when it does not exist.
func Ensure(ctx context.Context, js jetstream.KeyValueManager, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("registry bucket %s: %w", Bucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, TTL: ttl, Storage: jetstream.MemoryStorage,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, Bucket) // created meanwhile by someone else
	}
	if err != nil {
		return nil, fmt.Errorf("create registry bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// Lookup returns the bucket when it exists, without creating it: where NATS
// checks identities only the store may create it (it recreates it when the
// broker has lost it), so a reconciler waits for it.
func Lookup(ctx context.Context, js jetstream.KeyValueManager) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("registry bucket %s: %w (the store creates it)", Bucket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("registry bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// Registration is one replica's claim.
type Registration struct {
	replica Replica
	value   []byte
	// claim is the type keys' value (subjects.TypeClaim).
	claim []byte
	// ensure recreates the bucket (Join); nil for Register.
	ensure func(ctx context.Context) (jetstream.KeyValue, error)

	mu   sync.Mutex
	kv   jetstream.KeyValue
	last time.Time
}

// Join is Ensure followed by Register, and its Registration survives the
// loss of the bucket: when a refresh fails (a broker restarted with empty
// storage, the bucket deleted by hand), Refresh recreates the bucket and
// claims the keys again.
func Join(ctx context.Context, js jetstream.KeyValueManager, ttl time.Duration, r Replica) (*Registration, error) {
	return join(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return Ensure(ctx, js, ttl) }, r)
}

// JoinExisting is Join for a reconciler that may not create the bucket (a
// NATS user's permissions leave that to the store): its Registration looks
// the bucket up again when a refresh fails, and claims the keys again once
// the store has recreated it.
func JoinExisting(ctx context.Context, js jetstream.KeyValueManager, r Replica) (*Registration, error) {
	return join(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return Lookup(ctx, js) }, r)
}

func join(ctx context.Context, ensure func(context.Context) (jetstream.KeyValue, error), r Replica) (*Registration, error) {
	kv, err := ensure(ctx)
	if err != nil {
		return nil, err
	}
	return register(ctx, kv, r, ensure)
}

// Register claims every type of r for r.Name (refused with ErrTypeTaken,
// naming the holder, when another reconciler holds one) and announces the
// replica. Claims already made are kept when a later one is refused; they
// expire with the TTL.
func Register(ctx context.Context, kv jetstream.KeyValue, r Replica) (*Registration, error) {
	return register(ctx, kv, r, nil)
}

func register(ctx context.Context, kv jetstream.KeyValue, r Replica, ensure func(context.Context) (jetstream.KeyValue, error)) (*Registration, error) {
	if err := ValidName(r.Name); err != nil {
		return nil, err
	}
	if !replicaRE.MatchString(r.ID) {
		return nil, fmt.Errorf("%w: replica id %q (A-Z, a-z, 0-9, _ and -, at most 128)", ErrInvalid, r.ID)
	}
	if len(r.Types) == 0 {
		return nil, fmt.Errorf("%w: reconciler %s serves no type", ErrInvalid, r.Name)
	}
	for _, t := range r.Types {
		if err := ValidType(t); err != nil {
			return nil, err
		}
	}
	if err := ValidFinalizers(r.Finalizers); err != nil {
		return nil, err
	}
	for _, t := range r.Owns {
		if err := ValidType(t); err != nil {
			return nil, fmt.Errorf("owned type: %w", err)
		}
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now().UTC()
	}
	value, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	claim := subjects.TypeClaim{Reconciler: r.Name, Finalizers: r.Finalizers}
	reg := &Registration{kv: kv, replica: r, value: value, claim: claim.Encode(), ensure: ensure}
	return reg, reg.Refresh(ctx)
}

// Replica returns the registered replica.
func (g *Registration) Replica() Replica { return g.replica }

// LastRefresh is when the keys were last refreshed successfully.
func (g *Registration) LastRefresh() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

// Refresh re-claims the types and refreshes the replica key (the
// heartbeat). A type found held by another reconciler is ErrTypeTaken. A
// Registration made by Join that fails for another reason recreates the
// bucket when it is missing (JoinExisting's looks it up again) and tries
// once more.
func (g *Registration) Refresh(ctx context.Context) error {
	err := g.refresh(ctx, g.bucket())
	if err == nil || g.ensure == nil || errors.Is(err, ErrTypeTaken) || ctx.Err() != nil {
		return err
	}
	kv, eerr := g.ensure(ctx)
	if eerr != nil {
		return fmt.Errorf("%w (and the bucket could not be ensured: %w)", err, eerr)
	}
	g.mu.Lock()
	g.kv = kv
	g.mu.Unlock()
	return g.refresh(ctx, kv)
}

func (g *Registration) bucket() jetstream.KeyValue {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.kv
}

func (g *Registration) refresh(ctx context.Context, kv jetstream.KeyValue) error {
	for _, t := range g.replica.Types {
		if err := g.claimType(ctx, kv, t); err != nil {
			return err
		}
	}
	if _, err := kv.Put(ctx, subjects.ReplicaKey(g.replica.Name, g.replica.ID), g.value); err != nil {
		return fmt.Errorf("registry: announce replica %s: %w", g.replica.ID, err)
	}
	g.mu.Lock()
	g.last = time.Now()
	g.mu.Unlock()
	return nil
}

// claimType creates the type key, or refreshes it with a compare-and-set
// when it already names this reconciler.
func (g *Registration) claimType(ctx context.Context, kv jetstream.KeyValue, t sdk.TypeRef) error {
	key, value := typeKey(t), g.claim
	for range 5 {
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err := kv.Create(ctx, key, value); err == nil {
				return nil
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				return fmt.Errorf("registry: claim %s: %w", t, err)
			}
			continue // somebody created it meanwhile: look again
		case err != nil:
			return fmt.Errorf("registry: read %s: %w", t, err)
		}
		if holder, _ := subjects.ParseTypeClaim(e.Value()); holder.Reconciler != g.replica.Name {
			return fmt.Errorf("%w: %s is served by reconciler %q; reconciler %q may not serve it too", ErrTypeTaken, t, holder.Reconciler, g.replica.Name)
		}
		if _, err := kv.Update(ctx, key, value, e.Revision()); err == nil {
			return nil
		} else if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("registry: refresh %s: %w", t, err)
		}
		// Another replica refreshed it meanwhile: look again.
	}
	return fmt.Errorf("registry: claim %s: too many concurrent changes", t)
}

// Deregister removes the replica key, and the type keys too when no other
// replica of the reconciler is announced (a clean stop makes the types
// unserved at once instead of after the TTL).
func (g *Registration) Deregister(ctx context.Context) error {
	kv := g.bucket()
	if err := kv.Delete(ctx, subjects.ReplicaKey(g.replica.Name, g.replica.ID)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("registry: remove replica: %w", err)
	}
	live, err := Live(ctx, kv)
	if err != nil {
		return err
	}
	for _, r := range live {
		if r.Name == g.replica.Name && len(r.Replicas) > 0 {
			return nil
		}
	}
	for _, t := range g.replica.Types {
		e, err := kv.Get(ctx, typeKey(t))
		if err != nil {
			continue
		}
		if c, _ := subjects.ParseTypeClaim(e.Value()); c.Reconciler != g.replica.Name {
			continue
		}
		_ = kv.Delete(ctx, typeKey(t), jetstream.LastRevision(e.Revision()))
	}
	return nil
}

// Holder returns the reconciler serving t ("" when none is live).
func Holder(ctx context.Context, kv jetstream.KeyValue, t sdk.TypeRef) (string, error) {
	c, _, err := Claim(ctx, kv, t)
	return c.Reconciler, err
}

// Claim returns the claim on t: the reconciler serving it and the
// finalizers it owns beyond its own; ok is false when no live reconciler
// serves t.
func Claim(ctx context.Context, kv jetstream.KeyValue, t sdk.TypeRef) (c subjects.TypeClaim, ok bool, err error) {
	e, err := kv.Get(ctx, typeKey(t))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return subjects.TypeClaim{}, false, nil
	}
	if err != nil {
		return subjects.TypeClaim{}, false, fmt.Errorf("registry: read %s: %w", t, err)
	}
	c, ok = subjects.ParseTypeClaim(e.Value())
	return c, ok, nil
}

// Reconciler is one live reconciler: the types it holds and its replicas.
type Reconciler struct {
	Name     string        `json:"name"`
	Types    []sdk.TypeRef `json:"types"`
	Replicas []Replica     `json:"replicas"`
}

// parseReplica reads a replica key's value. Its types are objects {name,
// version}; "Type/version" strings are accepted too, and entries that are
// neither are dropped rather than losing the replica.
func parseReplica(data []byte) (Replica, bool) {
	var v struct {
		Replica
		Types []json.RawMessage `json:"types"`
	}
	if json.Unmarshal(data, &v) != nil || v.Name == "" {
		return Replica{}, false
	}
	rep := v.Replica
	rep.Types = nil
	for _, raw := range v.Types {
		var t sdk.TypeRef
		if json.Unmarshal(raw, &t) == nil && t.Name != "" {
			rep.Types = append(rep.Types, t)
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if n, ver, ok := strings.Cut(s, "/"); ok && n != "" && ver != "" {
				rep.Types = append(rep.Types, sdk.TypeRef{Name: n, Version: ver})
			}
		}
	}
	return rep, true
}

// Live lists the live reconcilers, sorted by name: each with the types it
// holds and its replicas (a reconciler whose replicas have all stopped but
// which still holds a type is listed with no replica).
func Live(ctx context.Context, kv jetstream.KeyValue) ([]Reconciler, error) {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("registry: list: %w", err)
	}
	defer func() { _ = w.Stop() }()
	byName := map[string]*Reconciler{}
	get := func(name string) *Reconciler {
		if byName[name] == nil {
			byName[name] = &Reconciler{Name: name}
		}
		return byName[name]
	}
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return nil, fmt.Errorf("registry: list: %w", ctx.Err())
		}
		if e == nil {
			break // every current value has been seen
		}
		key := e.Key()
		if n, v, ok := subjects.ParseTypeKey(key); ok {
			if c, ok := subjects.ParseTypeClaim(e.Value()); ok {
				r := get(c.Reconciler)
				r.Types = append(r.Types, sdk.TypeRef{Name: n, Version: v})
			}
		} else if subjects.IsReplicaKey(key) {
			if rep, ok := parseReplica(e.Value()); ok {
				rep.LastHeartbeat = e.Created().UTC()
				r := get(rep.Name)
				r.Replicas = append(r.Replicas, rep)
			}
		}
	}
	out := make([]Reconciler, 0, len(byName))
	for _, r := range byName {
		slices.SortFunc(r.Types, func(a, b sdk.TypeRef) int { return strings.Compare(a.String(), b.String()) })
		slices.SortFunc(r.Replicas, func(a, b Replica) int { return strings.Compare(a.ID, b.ID) })
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Reconciler) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
