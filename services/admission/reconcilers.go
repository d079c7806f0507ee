package admission

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/problem"
)

// liveTypes answers which reconciler serves a type, for the live-reconciler
// rule. It caches the registry's type keys (type.<Type>.<version> = the
// reconciler's claim, subjects.TypeClaim) from a KV watch. The bucket forgets a key its reconciler
// stopped refreshing after its max age without telling watchers, so a cached
// claim counts only while its last refresh is younger than the max age; a
// miss or a stale claim is answered by reading the key itself, so a
// reconciler that registered a moment ago is never refused.
type liveTypes struct {
	js  jetstream.KeyValueManager
	log *slog.Logger

	mu     sync.RWMutex
	kv     jetstream.KeyValue
	ttl    time.Duration
	owners map[typeKey]claim
}

type claim struct {
	subjects.TypeClaim
	at time.Time // the key's last write (server time)
}

func newLiveTypes(js jetstream.KeyValueManager, log *slog.Logger) *liveTypes {
	return &liveTypes{js: js, log: log, ttl: subjects.RegistryTTL, owners: map[typeKey]claim{}}
}

// run keeps the cache until ctx ends: it waits for the bucket to exist, then
// watches its type keys, and starts over when the watch ends or the NATS
// connection is re-established (a restarted broker may have lost the
// bucket, which the workers then recreate, and the watch with it).
func (l *liveTypes) run(ctx context.Context) {
	var reconnected chan nats.Status
	if c, ok := l.js.(interface{ Conn() *nats.Conn }); ok && c.Conn() != nil {
		reconnected = c.Conn().StatusChanged(nats.CONNECTED)
		defer c.Conn().RemoveStatusListener(reconnected)
	}
	delay := 250 * time.Millisecond
	for ctx.Err() == nil {
		kv, err := l.bucket(ctx)
		if err == nil && kv != nil {
			err = l.watch(ctx, kv, reconnected)
			if errors.Is(err, errReconnected) {
				l.log.Info("nats reconnected: watching the reconciler registry again")
				l.forget()
				delay = 250 * time.Millisecond
			}
		}
		if err != nil && ctx.Err() == nil {
			l.log.Debug("reconciler registry watch", "error", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		delay = min(2*delay, 2*time.Second)
	}
}

// bucket returns the registry bucket, nil while it does not exist.
func (l *liveTypes) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	l.mu.RLock()
	kv := l.kv
	l.mu.RUnlock()
	if kv != nil {
		return kv, nil
	}
	kv, err := l.js.KeyValue(ctx, subjects.RegistryBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ttl := subjects.RegistryTTL // when the bucket's status cannot be read
	if st, err := kv.Status(ctx); err == nil && st.TTL() > 0 {
		ttl = st.TTL()
	}
	l.mu.Lock()
	l.kv, l.ttl = kv, ttl
	l.mu.Unlock()
	return kv, nil
}

// errReconnected ends a watch when the NATS connection is re-established.
var errReconnected = errors.New("nats reconnected")

// forget drops the bucket handle, so that the next use looks the bucket up
// again (it may have been lost and recreated).
func (l *liveTypes) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kv = nil
}

func (l *liveTypes) watch(ctx context.Context, kv jetstream.KeyValue, reconnected <-chan nats.Status) error {
	w, err := kv.Watch(ctx, "type.>")
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	// The watch delivers every current key again: start from nothing.
	l.mu.Lock()
	l.owners = map[typeKey]claim{}
	l.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reconnected:
			return errReconnected
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch ended")
			}
			if e != nil {
				l.apply(e)
			}
		}
	}
}

func (l *liveTypes) apply(e jetstream.KeyValueEntry) {
	k, ok := parseTypeKey(e.Key())
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := subjects.ParseTypeClaim(e.Value()); ok && e.Operation() == jetstream.KeyValuePut {
		l.owners[k] = claim{TypeClaim: c, at: e.Created()}
	} else {
		delete(l.owners, k)
	}
}

func parseTypeKey(key string) (typeKey, bool) {
	rest, ok := strings.CutPrefix(key, "type.")
	if !ok {
		return typeKey{}, false
	}
	name, version, ok := strings.Cut(rest, ".")
	return typeKey{name, version}, ok && name != "" && version != ""
}

// owner returns the claim of the live reconciler serving name/version; ok
// is false when none does.
func (l *liveTypes) owner(ctx context.Context, name, version string) (c subjects.TypeClaim, ok bool, err error) {
	k := typeKey{name, version}
	l.mu.RLock()
	cached, found := l.owners[k]
	ttl := l.ttl
	l.mu.RUnlock()
	if found && time.Since(cached.at) < ttl {
		return cached.TypeClaim, true, nil
	}
	kv, err := l.bucket(ctx)
	if err != nil {
		return c, false, l.unavailable(err)
	}
	if kv == nil {
		return c, false, nil // no reconciler ever started
	}
	e, err := kv.Get(ctx, subjects.TypeKey(name, version))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return c, false, nil
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrNoResponders) {
		l.forget() // lost with a broker's storage: no reconciler has registered since
		return c, false, nil
	}
	if err != nil {
		return c, false, l.unavailable(err)
	}
	l.apply(e)
	c, ok = subjects.ParseTypeClaim(e.Value())
	return c, ok, nil
}

func (l *liveTypes) unavailable(err error) error {
	l.log.Warn("reading the reconciler registry failed", "error", err)
	return problem.New(problem.Unavailable, problem.CodeUnavailable, "cannot read the live reconciler registry: %v", err)
}

// requireReconciler applies the live-reconciler rule to a new resource of
// name/version: refused (400 no_reconciler) unless a live reconciler serves
// the type; else the finalizers to add: the reconciler's own and those it
// declared (subjects.TypeClaim.CreationFinalizers).
func (l *liveTypes) requireReconciler(ctx context.Context, name, version string) ([]string, error) {
	owner, ok, err := l.owner(ctx, name, version)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, problem.New(problem.Invalid, problem.CodeNoReconciler,
			"no live reconciler serves %s/%s: start one for this type (for a demo: no8s-reconciler noop --types %s/%s), then retry; GET /api/v1/reconcilers lists the live ones",
			name, version, name, version).
			WithFields(problem.FieldError{Path: "/resource_type_name", Message: "no live reconciler serves " + name + "/" + version})
	}
	return owner.CreationFinalizers(), nil
}
