// Package collector is the garbage collector's rules over owner references,
// as Kubernetes' garbage collector applies them
// (docs/design/relationships.md): what to do with a dependent whose owners
// are gone, and how a Foreground or Orphan deletion of an owner proceeds.
// It reads the store as it is now (Reader) and writes as a client does
// (Writer: in the scheduler, fenced REST writes through the gateway). It
// keeps no state between calls: every decision is made on what the store
// answers at that moment, so a collector that restarts, or a new leader,
// simply sweeps again. The one thing it remembers, for as long as its term
// lasts, is which dependents admission refused it and when to ask again
// (backoff).
package collector

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/scheduler/backoff"
)

// Reasons a collection is logged with.
const (
	// ReasonOwnerGone: every owner reference of the dependent dangles (the
	// owner never existed, was purged, or the uid names another resource).
	ReasonOwnerGone = "owner-gone"
	// ReasonDanglingRef: the dependent keeps a live owner; a reference
	// that dangles is removed.
	ReasonDanglingRef = "dangling-reference"
	// ReasonForeground: the owner is being deleted in the foreground.
	ReasonForeground = "foreground"
	// ReasonOrphan: the owner is being deleted with its dependents
	// orphaned.
	ReasonOrphan = "orphan"
)

// EventDenied is the reason of the Warning Event recorded on a dependent
// when admission refuses one of the collector's writes to it (a validating
// webhook denied it, or failed).
const EventDenied = "GarbageCollectionDenied"

// The backoff between the collector's attempts at a write admission
// refused: doubling from DeniedBackoff up to DeniedBackoffMax.
const (
	DeniedBackoff    = 2 * time.Second
	DeniedBackoffMax = 5 * time.Minute
)

// The wait before a resource whose write met a conflict is judged again:
// doubling from ConflictRetry up to ConflictRetryMax while it keeps
// changing under the collector.
const (
	ConflictRetry    = 250 * time.Millisecond
	ConflictRetryMax = 30 * time.Second
)

// Dangling is a dependent with the owner references of it that dangle.
type Dangling struct {
	Resource *resource.Resource
	Refs     []resource.OwnerReference
}

// Reader reads the store as it is now.
type Reader interface {
	// Dependents returns the resources whose owner references name
	// ownerUID, by ascending id after afterID, at most limit (fewer: the
	// last page).
	Dependents(ctx context.Context, ownerUID string, afterID int64, limit int) ([]*resource.Resource, error)
	// Dangling returns the next page of the sweep of resources with owner
	// references after afterID: those with dangling references, and the id
	// to continue after (0: the sweep is over).
	Dangling(ctx context.Context, afterID int64, limit int) ([]Dangling, int64, error)
}

// Writer writes as a client: each write is admitted as a client's is and,
// in the scheduler, fenced by the collector's leader epoch. A write that
// finds the resource changed (a conflict) or gone returns an error the
// collector skips (IsSkippable): the next event or sweep looks again.
type Writer interface {
	// Delete requests the deletion of r with propagation policy p.
	Delete(ctx context.Context, r *resource.Resource, p lifecycle.Propagation) error
	// SetOwnerReferences replaces r's owner references with refs, at r's
	// resource_version.
	SetOwnerReferences(ctx context.Context, r *resource.Resource, refs []resource.OwnerReference) error
	// RemoveFinalizer removes finalizer f from r.
	RemoveFinalizer(ctx context.Context, r *resource.Resource, f string) error
	// Warn records a Warning Event with reason and message on r.
	Warn(ctx context.Context, r *resource.Resource, reason, message string) error
}

// ErrSkip marks a write the collector passes over: the resource went
// meanwhile. Writers wrap it.
var ErrSkip = errors.New("skipped: the resource is gone")

// ErrConflict marks a write whose resource changed since the collector read
// it (a reconciler's status, a user's edit): the write is not made, and a
// pass judges the resource again on a fresh read soon after (ConflictRetry,
// doubling up to ConflictRetryMax while it keeps changing). Writers wrap
// it.
var ErrConflict = errors.New("the resource changed since it was read")

// ErrDenied marks a write admission refused: a validating webhook denied
// it or failed. The collector leaves the resource, records EventDenied on
// it with the error's message, and tries again after a backoff. Writers
// wrap it.
var ErrDenied = errors.New("refused by admission")

// Collector applies the rules. Its methods are called from one goroutine
// at a time.
type Collector struct {
	read  Reader
	write Writer
	log   *slog.Logger
	page  int
	now   func() time.Time
	// denied holds, by resource uid, the writes admission refused and
	// when to try them again; changed, the writes that met a conflict and
	// when to judge their resource again.
	denied, changed map[string]retry
}

// retry is a resource's run of writes that did not go through, and when to
// try again.
type retry struct {
	failures int
	until    time.Time
}

// New returns a collector reading through r and writing through w, pages of
// page resources (<= 0: 500).
func New(r Reader, w Writer, page int, log *slog.Logger) *Collector {
	if page <= 0 {
		page = 500
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{read: r, write: w, log: log, page: page, now: time.Now, denied: map[string]retry{}, changed: map[string]retry{}}
}

// WithClock makes the collector read the time from now (tests).
func (c *Collector) WithClock(now func() time.Time) *Collector {
	c.now = now
	return c
}

// NextRetry is when the earliest write admission refused, or the earliest
// resource whose write met a conflict, is due again; ok is false when none
// waits. One whose wait ran out long ago (its resource went meanwhile, or
// needs nothing any more) is forgotten.
func (c *Collector) NextRetry() (at time.Time, ok bool) {
	now := c.now()
	for _, m := range []struct {
		retries map[string]retry
		max     time.Duration
	}{{c.denied, DeniedBackoffMax}, {c.changed, ConflictRetryMax}} {
		for uid, d := range m.retries {
			switch {
			case d.until.Before(now.Add(-m.max)):
				delete(m.retries, uid)
			case !d.until.After(now):
			case !ok || d.until.Before(at):
				at, ok = d.until, true
			}
		}
	}
	return at, ok
}

// Stats counts what one call did.
type Stats struct {
	Deleted, RefsRemoved, FinalizersRemoved, Skipped int
	// Denied counts writes admission refused; Deferred, writes not tried
	// because an earlier refusal's backoff has not run out; Conflicts,
	// writes whose resource had changed since it was read.
	Denied, Deferred, Conflicts int
}

// undone counts the writes of s that did not go through.
func (s Stats) undone() int { return s.Skipped + s.Denied + s.Deferred + s.Conflicts }

func (s *Stats) add(o Stats) {
	s.Deleted += o.Deleted
	s.RefsRemoved += o.RefsRemoved
	s.FinalizersRemoved += o.FinalizersRemoved
	s.Skipped += o.Skipped
	s.Denied += o.Denied
	s.Deferred += o.Deferred
	s.Conflicts += o.Conflicts
}

// waiting reports whether r's writes wait for a refusal's backoff.
func (c *Collector) waiting(r *resource.Resource) bool {
	d, ok := c.denied[r.UID]
	return ok && c.now().Before(d.until)
}

// Sweep walks every resource with owner references and collects the ones
// with dangling references (CollectDangling): the safety net for a crash,
// a restore, or an owner gone while the collector was off.
func (c *Collector) Sweep(ctx context.Context) (Stats, error) {
	var st Stats
	var after int64
	for {
		items, next, err := c.read.Dangling(ctx, after, c.page)
		if err != nil {
			return st, fmt.Errorf("sweep after resource %d: %w", after, err)
		}
		for _, d := range items {
			s, err := c.CollectDangling(ctx, d)
			st.add(s)
			if err != nil {
				return st, err
			}
		}
		if next == 0 {
			return st, nil
		}
		after = next
	}
}

// CollectDangling applies the rule to one dependent: when every owner
// reference of it dangles it is deleted (Background, through finalizers);
// otherwise its dangling references are removed and it is kept.
func (c *Collector) CollectDangling(ctx context.Context, d Dangling) (Stats, error) {
	r := d.Resource
	if len(d.Refs) == 0 {
		return Stats{}, nil
	}
	if len(d.Refs) == len(r.OwnerReferences) {
		if r.DeletedAt != nil {
			return Stats{}, nil
		}
		return c.do(ctx, func() error { return c.write.Delete(ctx, r, lifecycle.PropagationBackground) }, Stats{Deleted: 1},
			"deleted a dependent whose every owner is gone", r, d.Refs, ReasonOwnerGone)
	}
	keep := slices.DeleteFunc(slices.Clone(r.OwnerReferences), func(o resource.OwnerReference) bool { return slices.Contains(d.Refs, o) })
	return c.do(ctx, func() error { return c.write.SetOwnerReferences(ctx, r, keep) }, Stats{RefsRemoved: len(d.Refs)},
		"removed dangling owner references from a dependent that keeps a live owner", r, d.Refs, ReasonDanglingRef)
}

// OwnerPurged collects the dependents of a purged owner: the reference to
// it dangles for good (uids are never reused), so a dependent that has no
// other reference is deleted and one with others loses that reference
// (the sweep judges the others).
func (c *Collector) OwnerPurged(ctx context.Context, uid string) (Stats, error) {
	var st Stats
	err := c.eachDependent(ctx, uid, func(r *resource.Resource) error {
		var refs []resource.OwnerReference
		for _, o := range r.OwnerReferences {
			if o.UID == uid {
				refs = append(refs, o)
			}
		}
		s, err := c.CollectDangling(ctx, Dangling{Resource: r, Refs: refs})
		st.add(s)
		return err
	})
	return st, err
}

// Propagate advances the deletion of an owner that is deleting with a
// propagation finalizer: Foreground deletes its dependents (in the
// foreground themselves when they own others) and removes
// foregroundDeletion once no dependent with block_owner_deletion is left;
// Orphan removes the references to it from every dependent, then the
// orphan finalizer. It reports whether the owner's finalizer was removed.
func (c *Collector) Propagate(ctx context.Context, owner *resource.Resource) (Stats, error) {
	if owner.DeletedAt == nil {
		return Stats{}, nil
	}
	var st Stats
	if slices.Contains(owner.Finalizers, lifecycle.FinalizerOrphan) {
		s, err := c.orphan(ctx, owner)
		st.add(s)
		if err != nil {
			return st, err
		}
	}
	if slices.Contains(owner.Finalizers, lifecycle.FinalizerForeground) {
		s, err := c.foreground(ctx, owner)
		st.add(s)
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// orphan removes every reference to owner from its dependents, then the
// orphan finalizer when none is left that still names it.
func (c *Collector) orphan(ctx context.Context, owner *resource.Resource) (Stats, error) {
	var st Stats
	left := 0
	err := c.eachDependent(ctx, owner.UID, func(r *resource.Resource) error {
		keep := slices.DeleteFunc(slices.Clone(r.OwnerReferences), func(o resource.OwnerReference) bool { return o.UID == owner.UID })
		removed := slices.DeleteFunc(slices.Clone(r.OwnerReferences), func(o resource.OwnerReference) bool { return o.UID != owner.UID })
		s, err := c.do(ctx, func() error { return c.write.SetOwnerReferences(ctx, r, keep) }, Stats{RefsRemoved: len(removed)},
			"orphaned a dependent: removed its reference to an owner deleted with propagation Orphan", r, removed, ReasonOrphan)
		st.add(s)
		if s.undone() > 0 {
			left++
		}
		return err
	})
	if err != nil || left > 0 {
		return st, err
	}
	s, err := c.do(ctx, func() error { return c.write.RemoveFinalizer(ctx, owner, lifecycle.FinalizerOrphan) }, Stats{FinalizersRemoved: 1},
		"removed the orphan finalizer: no dependent names the owner any more", owner, nil, ReasonOrphan)
	st.add(s)
	return st, err
}

// foreground deletes the dependents of owner that are not deleting yet,
// and removes foregroundDeletion once none that blocks its owner's
// deletion is left.
func (c *Collector) foreground(ctx context.Context, owner *resource.Resource) (Stats, error) {
	var st Stats
	blocking := 0
	err := c.eachDependent(ctx, owner.UID, func(r *resource.Resource) error {
		refs := refsTo(r, owner)
		if len(refs) == 0 {
			// Its reference names the uid with another type or name: it
			// dangles, which the sweep handles; it is not a dependent.
			return nil
		}
		if slices.ContainsFunc(refs, func(o resource.OwnerReference) bool { return o.BlockOwnerDeletion }) {
			blocking++
		}
		if r.DeletedAt != nil {
			return nil
		}
		// A dependent that owns others goes in the foreground too, so
		// that what blocks it goes before it, as Kubernetes does.
		p := lifecycle.PropagationBackground
		if more, err := c.read.Dependents(ctx, r.UID, 0, 1); err != nil {
			return fmt.Errorf("dependents of %s: %w", r.UID, err)
		} else if len(more) > 0 {
			p = lifecycle.PropagationForeground
		}
		s, err := c.do(ctx, func() error { return c.write.Delete(ctx, r, p) }, Stats{Deleted: 1},
			"deleted a dependent of an owner deleted with propagation Foreground", r, refs, ReasonForeground)
		st.add(s)
		return err
	})
	if err != nil || blocking > 0 {
		return st, err
	}
	s, err := c.do(ctx, func() error { return c.write.RemoveFinalizer(ctx, owner, lifecycle.FinalizerForeground) }, Stats{FinalizersRemoved: 1},
		"removed foregroundDeletion: no dependent blocks the owner's deletion any more", owner, nil, ReasonForeground)
	st.add(s)
	return st, err
}

// eachDependent calls fn for every dependent of uid, page by page.
func (c *Collector) eachDependent(ctx context.Context, uid string, fn func(*resource.Resource) error) error {
	var after int64
	for {
		rs, err := c.read.Dependents(ctx, uid, after, c.page)
		if err != nil {
			return fmt.Errorf("dependents of %s after resource %d: %w", uid, after, err)
		}
		for _, r := range rs {
			if err := fn(r); err != nil {
				return err
			}
			after = r.ID
		}
		if len(rs) < c.page {
			return nil
		}
	}
}

// do runs one write and logs it as a collection (dependent, references,
// reason); a skipped write is counted and logged at debug level, and so is
// one that met a conflict, whose resource is judged again at a pass soon
// after. A write admission refuses is counted, recorded on r as a Warning
// Event and held back until its backoff runs out (deferred until then).
func (c *Collector) do(ctx context.Context, write func() error, done Stats, msg string, r *resource.Resource, refs []resource.OwnerReference, reason string) (Stats, error) {
	attrs := []any{"resource_id", r.ID, "namespace", r.Namespace, "type", r.ResourceTypeName + "/" + r.ResourceTypeVersion,
		"name", r.Name, "reason", reason}
	for _, o := range refs {
		attrs = append(attrs, "reference", fmt.Sprintf("%s/%s %s (uid %s)", o.ResourceTypeName, o.ResourceTypeVersion, o.Name, o.UID))
	}
	if c.waiting(r) {
		return Stats{Deferred: 1}, nil
	}
	err := write()
	switch {
	case errors.Is(err, ErrSkip):
		c.log.Debug("garbage collection skipped: "+err.Error(), attrs...)
		c.forget(r)
		return Stats{Skipped: 1}, nil
	case errors.Is(err, ErrConflict):
		d := c.again(c.changed, r, ConflictRetry, ConflictRetryMax)
		c.log.Debug("garbage collection met a conflict; judging the resource again soon", append(attrs, "error", err, "retry_in", d)...)
		return Stats{Conflicts: 1}, nil
	case errors.Is(err, ErrDenied):
		return c.refused(ctx, r, err, attrs), nil
	case err != nil:
		return Stats{}, fmt.Errorf("%s %s/%s %q: %w", reason, r.ResourceTypeName, r.ResourceTypeVersion, r.Name, err)
	}
	c.forget(r)
	c.log.Info("garbage collection: "+msg, attrs...)
	return done, nil
}

// refused holds r's writes back for the next backoff step and records why
// on it. The Event is best effort: a failure to record it is logged.
func (c *Collector) refused(ctx context.Context, r *resource.Resource, err error, attrs []any) Stats {
	wait := c.again(c.denied, r, DeniedBackoff, DeniedBackoffMax)
	c.log.Warn("garbage collection refused by admission; trying again after a backoff", append(attrs, "error", err, "retry_in", wait, "refusals", c.denied[r.UID].failures)...)
	msg := fmt.Sprintf("the garbage collector tries again in %s: %v", wait.Round(time.Second), err)
	if werr := c.write.Warn(ctx, r, EventDenied, msg); werr != nil {
		c.log.Warn("garbage collection: could not record the refusal as an Event", append(attrs, "error", werr)...)
	}
	return Stats{Denied: 1}
}

// again records one more write to r that did not go through in retries
// and returns the wait before the next: doubling from base up to max, with
// jitter seeded by r's uid.
func (c *Collector) again(retries map[string]retry, r *resource.Resource, base, max time.Duration) time.Duration {
	d := retries[r.UID]
	d.failures++
	h := fnv.New64a()
	h.Write([]byte(r.UID))
	wait := backoff.Delay(base, max, d.failures, backoff.DefaultJitter, backoff.Seed(int64(h.Sum64()), int64(d.failures)))
	d.until = c.now().Add(wait)
	retries[r.UID] = d
	return wait
}

// forget drops what the collector held about r's writes that did not go
// through.
func (c *Collector) forget(r *resource.Resource) {
	delete(c.denied, r.UID)
	delete(c.changed, r.UID)
}

// refsTo are r's owner references to owner: its uid, type, version and
// name.
func refsTo(r *resource.Resource, owner *resource.Resource) []resource.OwnerReference {
	var out []resource.OwnerReference
	for _, o := range r.OwnerReferences {
		if o.UID == owner.UID && o.ResourceTypeName == owner.ResourceTypeName && o.ResourceTypeVersion == owner.ResourceTypeVersion && o.Name == owner.Name {
			out = append(out, o)
		}
	}
	return out
}
