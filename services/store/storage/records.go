package storage

// Events in the Kubernetes sense (records attached to a resource: type,
// reason, message, count, first and last time, source), apart from the
// change stream: recording one takes no revision and writes no outbox row.
// A repeat of (type, reason, message) on the same resource within the dedup
// window raises the existing record's count and last time instead of
// adding a record. Records outlive their resource until retention prunes
// them: by age, and beyond a number per resource (oldest first), in the
// recording transaction. And leader leases: named leadership leases with a
// fencing epoch for singleton clients, and the fence a client write
// carries.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
)

// Event bounds and defaults.
const (
	// DefaultEventDedupWindow is how long a repeat raises the count of the
	// same record.
	DefaultEventDedupWindow = 10 * time.Minute
	// DefaultEventRetention is how long a record is kept after its last
	// occurrence.
	DefaultEventRetention = 24 * time.Hour
	// DefaultEventsPerResource bounds the records kept per resource.
	DefaultEventsPerResource = 100
	// MaxEventsPerCall bounds the events one completion carries.
	MaxEventsPerCall = 32
	// eventPruneBatch bounds the expired records one recording deletes.
	eventPruneBatch = 100
)

// EventInput is an event to record.
type EventInput struct {
	// Type is names.EventNormal or names.EventWarning.
	Type    string
	Reason  string
	Message string
	// Source names the emitting component (registry-sync, reconciler/noop).
	Source string
}

// Validate checks an event; path prefixes the field paths.
func (e EventInput) Validate(path string) error {
	var errs []FieldError
	errs = append(errs, fieldOf(names.EventType(path+"/type", e.Type))...)
	errs = append(errs, fieldOf(names.EventReason(path+"/reason", e.Reason))...)
	errs = append(errs, fieldOf(names.EventMessage(path+"/message", e.Message))...)
	if strings.ContainsRune(e.Message, 0) {
		errs = append(errs, FieldError{Path: path + "/message", Message: "must not contain NUL characters"})
	}
	if len(e.Source) > names.MaxEventSourceBytes || strings.ContainsRune(e.Source, 0) {
		errs = append(errs, FieldError{Path: path + "/source", Message: fmt.Sprintf("at most %d bytes, no NUL", names.MaxEventSourceBytes)})
	}
	if len(errs) > 0 {
		return NewError(ErrInvalid, "invalid event").WithFields(errs...)
	}
	return nil
}

// EventSource is the source of the events a lease holder sends with its
// completion: reconciler/<name>, name being the holder up to its first "/".
func EventSource(holder string) string {
	name, _, _ := strings.Cut(holder, "/")
	return names.ReconcilerEventSourcePrefix + name
}

// RecordEventRequest records one event on a resource.
type RecordEventRequest struct {
	ResourceID int64
	Event      EventInput
}

// EventRecord is a stored event.
type EventRecord struct {
	ID                  int64
	ResourceID          int64
	ResourceUID         string
	ResourceName        string
	ResourceTypeName    string
	ResourceTypeVersion string
	Type                string
	Reason              string
	Message             string
	Source              string
	Count               int32
	FirstTime, LastTime time.Time
}

// ListEventsRequest pages through events, newest first.
type ListEventsRequest struct {
	// ResourceID restricts the list to one resource's events (0: all).
	ResourceID int64
	// Type and Reason filter when set.
	Type, Reason string
	// Limit bounds the page (0: 50; at most 500).
	Limit int
	// BeforeID pages back: events with a smaller id.
	BeforeID int64
}

// Page sizes of ListEvents.
const (
	DefaultEventsPage = 50
	MaxEventsPage     = 500
)

// PageLimit is the request's page size.
func (req ListEventsRequest) PageLimit() (int, error) {
	switch {
	case req.Limit == 0:
		return DefaultEventsPage, nil
	case req.Limit < 0 || req.Limit > MaxEventsPage:
		return 0, InvalidField("/limit", fmt.Sprintf("must be between 1 and %d", MaxEventsPage))
	}
	return req.Limit, nil
}

// EventDedupWindow is the dedup window (DefaultEventDedupWindow when unset).
func (o Options) EventDedupWindow() time.Duration {
	if o.EventDedup <= 0 {
		return DefaultEventDedupWindow
	}
	return o.EventDedup
}

// EventRetentionAge is how long records are kept (DefaultEventRetention
// when unset).
func (o Options) EventRetentionAge() time.Duration {
	if o.EventRetention <= 0 {
		return DefaultEventRetention
	}
	return o.EventRetention
}

// MaxEventsPerResource is the number of records kept per resource.
func (o Options) MaxEventsPerResource() int {
	if o.EventsPerResource <= 0 {
		return DefaultEventsPerResource
	}
	return o.EventsPerResource
}

// EventPruneBatch bounds the expired records one recording deletes, so
// that pruning costs every recording a little rather than one a lot.
func EventPruneBatch() int { return eventPruneBatch }

// ValidateEvents checks the events a completion carries.
func ValidateEvents(path string, evs []EventInput) error {
	if len(evs) > MaxEventsPerCall {
		return InvalidField(path, fmt.Sprintf("at most %d events per call", MaxEventsPerCall))
	}
	for i, e := range evs {
		if err := e.Validate(fmt.Sprintf("%s/%d", path, i)); err != nil {
			return err
		}
	}
	return nil
}

// Fence is what a fenced client write carries: the name of a leader lease
// and the epoch its writer holds. The write commits only while that epoch
// is the lease's current one and the lease has not expired, checked in the
// write's own transaction, so a deposed leader (paused past its lease, then
// resumed) can change nothing.
type Fence struct {
	Lease string
	Epoch int64
}

// IsZero reports whether f fences nothing.
func (f Fence) IsZero() bool { return f.Lease == "" && f.Epoch == 0 }

// Validate checks a fence.
func (f Fence) Validate() error {
	if !names.IsDNSLabel(f.Lease) {
		return InvalidField("/fence/lease", "a fence names a leader lease: a DNS-1123 label")
	}
	if f.Epoch <= 0 {
		return InvalidField("/fence/epoch", "a fence's epoch is a positive integer")
	}
	return nil
}

type fenceKey struct{}

// WithFence returns ctx carrying the fence f: every write of a Store on
// that context (creates, updates, deletes, finalizers, events) commits
// only if f holds (CheckFence), checked in its own transaction.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf is the fence ctx carries (zero: none).
func FenceOf(ctx context.Context) Fence {
	f, _ := ctx.Value(fenceKey{}).(Fence)
	return f
}

// LeaderState is a leader lease as a backend read it in a write
// transaction (Found false: no such lease).
type LeaderState struct {
	Found     bool
	Epoch     int64
	ExpiresAt *time.Time
	Now       time.Time
}

// CheckFence refuses a write whose fence f does not hold in cur: the lease
// must exist, f's epoch must be its current one, and it must be unexpired.
func CheckFence(f Fence, cur LeaderState) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if !cur.Found {
		return StaleEpoch("leader lease %q does not exist: this write is fenced by epoch %d of it", f.Lease, f.Epoch)
	}
	valid := cur.ExpiresAt != nil && cur.ExpiresAt.After(cur.Now)
	if f.Epoch != cur.Epoch {
		return StaleEpoch("leader lease %q epoch %d is stale: the current epoch is %d", f.Lease, f.Epoch, cur.Epoch)
	}
	if !valid {
		return StaleEpoch("leader lease %q epoch %d has expired; renew it first", f.Lease, f.Epoch)
	}
	return nil
}

// ValidateLeaderCampaign checks a CampaignLeader call and returns the
// lease's length (d 0: DefaultSchedulerLease).
func ValidateLeaderCampaign(name, holder string, d time.Duration) (time.Duration, error) {
	if !names.IsDNSLabel(name) {
		return 0, InvalidField("/name", "a leader lease's name is a DNS-1123 label")
	}
	return ValidateCampaign(holder, d)
}
