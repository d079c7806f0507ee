package registrysync

// HttpSource polls (issue 18, scope 2): the leader's loop polls every
// HttpSource when its interval is due, when its spec changed or when it is
// being deleted, maps the items of the list to resources of the target type
// (package httpsource) and makes the set of resources labelled with the
// source equal to them through setsync, the Tenants' set-sync: a failed
// poll writes nothing, a bad item or a failed write deletes nothing. Writes
// are the Tenants' fenced writes (syncer.write). See
// docs/design/httpsource.md.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	apiclient "github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/internal/httpsource"
	"github.com/no8s/no8s/services/internal/strictjson"
	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/registrysync/httppoll"
	"github.com/no8s/no8s/services/registrysync/setsync"
)

// Reasons of an HttpSource's Synced condition besides httppoll's.
const (
	ReasonInvalidBody  = "InvalidBody"
	ReasonTooManyItems = "TooManyItems"
	ReasonInvalidItems = "InvalidItems"
	ReasonSourceWrites = "WritesFailed"
	ReasonListFailed   = "ListFailed"
)

// Event reasons registry-sync records on an HttpSource (besides
// EventSyncFailed).
const (
	EventInvalidItems           = "InvalidItems"
	EventResourceDeletionFailed = "ResourceDeletionFailed"
)

// srcState is what the loop knows of one HttpSource.
type srcState struct {
	generation int64
	deleting   bool
	next       time.Time
	last       *srcResult
	// etag and items are the last complete read of this generation: a 304
	// to If-None-Match etag means items again.
	etag  string
	items map[string]desiredItem
	trig  trigState
	// busy: a sync of it is running.
	busy bool
}

// srcResult is one sync of one HttpSource.
type srcResult struct {
	Generation       int64
	Deleting         bool
	At               time.Time
	Duration         time.Duration
	Items            int
	Desired          int
	Ready, Failed    int
	InvalidItems     int
	Created, Updated int
	Deleted          int
	NotModified      bool
	ETag             string
	Reason, Message  string
	Partial          bool
	Err              error
	Remaining        int
}

// settled reports whether every desired resource is ready or failed.
func (r *srcResult) settled() bool { return r.Err != nil || r.Ready+r.Failed >= r.Desired }

// summary is what the source's status shows of a result, without its
// times: a sync whose summary equals the stored one writes no status.
func (r *srcResult) summary() map[string]any {
	return map[string]any{
		"items": r.Items, "desired": r.Desired, "ready": r.Ready, "failed": r.Failed,
		"invalidItems": r.InvalidItems, "syncedReason": r.Reason, "etag": r.ETag,
	}
}

// desiredItem is a resource as the source's list wants it.
type desiredItem struct {
	httpsource.Item
	applied string
}

// roundSources syncs every HttpSource that is due.
func (s *syncer) roundSources(ctx context.Context) error {
	srcs, err := s.svc.list(ctx, sdk.Type(httpsource.Type, httpsource.Version), "", "")
	if err != nil {
		return err
	}
	now := time.Now()
	present := map[string]bool{}
	for _, src := range srcs {
		k := key(src)
		present[k] = true
		s.mu.Lock()
		st := s.sources[k]
		if st == nil {
			st = &srcState{}
			s.sources[k] = st
		}
		if st.generation != src.Generation {
			st.etag, st.items = "", nil
		}
		due := !st.busy && (st.last == nil || src.Generation != st.generation || src.Deleting() != st.deleting || !now.Before(st.next))
		if due {
			st.busy = true
		}
		etag, cached := st.etag, st.items
		s.mu.Unlock()
		if !due {
			continue
		}
		if !s.start(ctx, func(ctx context.Context) { s.syncSourceDue(ctx, src, st, etag, cached) }) {
			s.mu.Lock()
			st.busy = false
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	for k, st := range s.sources {
		if !present[k] && !st.busy {
			delete(s.sources, k)
		}
	}
	s.mu.Unlock()
	return nil
}

// syncSourceDue syncs one HttpSource (in the pool), records the result in
// st and asks for its status write.
func (s *syncer) syncSourceDue(ctx context.Context, src *sdk.Resource, st *srcState, etag string, cached map[string]desiredItem) {
	ctx, span := s.startSpan(ctx, src)
	res, items := s.syncSource(ctx, src, etag, cached)
	endSyncSpan(span, res.Err, res.Reason)
	if errors.Is(res.Err, errDeposed) {
		s.deposed("HttpSource "+key(src), res.Err)
		return
	}
	s.svc.m.sourcePolled(res, res.Duration)
	s.mu.Lock()
	st.generation, st.deleting, st.last = src.Generation, src.Deleting(), res
	if items != nil {
		st.etag, st.items = res.ETag, items
	} else if res.Err == nil && !res.NotModified {
		// A read that was not complete: poll in full next time.
		st.etag, st.items = "", nil
	}
	st.next = s.recorded(sourceInterval(src), res.settled() && !res.Deleting)
	s.mu.Unlock()
	s.triggerStatus(ctx, src, storedSourceSummary(src), fmt.Sprint(res.summary()), &st.trig)
	s.mu.Lock()
	st.busy = false
	s.mu.Unlock()
}

// syncSource polls src and makes its resources equal to its items. It
// returns the items of a complete read (nil otherwise), to be sent again
// when the server answers 304.
func (s *syncer) syncSource(ctx context.Context, src *sdk.Resource, etag string, cached map[string]desiredItem) (*srcResult, map[string]desiredItem) {
	start := time.Now()
	res := &srcResult{Generation: src.Generation, Deleting: src.Deleting(), At: start.UTC(), ETag: etag}
	defer func() { res.Duration = time.Since(start) }()
	log := s.log.With("httpsource", src.Name, "namespace", src.Namespace, "generation", src.Generation)
	var spec httpsource.Spec
	if err := src.DecodeSpec(&spec); err != nil {
		res.Err, res.Reason, res.Message = err, ReasonInvalidBody, err.Error()
		return res, nil
	}
	current, err := s.listManaged(ctx, src, spec.Target)
	if err != nil {
		res.Err, res.Reason, res.Message = err, ReasonListFailed, err.Error()
		return res, nil
	}
	desired := map[string]desiredItem{}
	complete := true
	var problems []string
	var keep map[string]desiredItem
	if !res.Deleting {
		var ok bool
		if desired, problems, ok = s.pollItems(ctx, src, spec, etag, cached, res, current, log); !ok {
			return res, nil
		}
		if complete = len(problems) == 0; complete {
			keep = maps.Clone(desired)
		}
	}
	live, dropped := liveResources(current, desired)
	if dropped {
		complete = false
	}
	out := setsync.Sync(ctx, desired, live, complete, s.svc.cfg.Writes, s.sourceOps(src, spec), strings.Compare)
	res.Created, res.Updated, res.Deleted = out.Created, out.Updated, out.Deleted
	if out.Stopped != nil {
		res.Err, res.Reason, res.Message = out.Stopped, "Deposed", out.Stopped.Error()
		return res, nil
	}
	for _, k := range slices.Sorted(maps.Keys(out.Failed)) {
		problems = append(problems, fmt.Sprintf("%s %s: %v", spec.Target, k, out.Failed[k]))
	}
	countManaged(res, current, desired)
	if !s.sourceOutcome(ctx, src, spec, res, problems, len(out.Failed) > 0) {
		keep = nil
	}
	if out.Created+out.Updated+out.Deleted > 0 || len(problems) > 0 {
		log.Info("synced", "created", out.Created, "updated", out.Updated, "deleted", out.Deleted, "unchanged", out.Unchanged,
			"kept", out.DeletesSkipped, "problems", len(problems), "not_modified", res.NotModified, "duration", time.Since(start))
	} else {
		log.Debug("synced", "unchanged", out.Unchanged, "not_modified", res.NotModified, "duration", time.Since(start))
	}
	return res, keep
}

// pollItems polls src and maps its items (the cached ones when the server
// answers 304): desired by name, and the problems of the items that did not
// map. ok is false when the poll failed: res says why, and nothing is to be
// written.
func (s *syncer) pollItems(ctx context.Context, src *sdk.Resource, spec httpsource.Spec, etag string, cached map[string]desiredItem,
	res *srcResult, current map[string]*sdk.Resource, log *slog.Logger) (desired map[string]desiredItem, problems []string, ok bool) {
	fail := func(reason string, err error) (map[string]desiredItem, []string, bool) {
		res.Err, res.Reason, res.Message = err, reason, err.Error()
		res.ETag = ""
		countManaged(res, current, nil)
		log.Warn("poll failed: nothing written", "reason", reason, "error", err)
		s.event(ctx, src, names.EventWarning, EventSyncFailed, fmt.Sprintf("%s: %v", reason, err))
		return nil, nil, false
	}
	resp, err := s.svc.poller.Poll(ctx, src.Namespace, spec, etag)
	if err != nil {
		reason := httppoll.ReasonUnreachable
		var pe *httppoll.Error
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		return fail(reason, err)
	}
	res.ETag = resp.ETag
	if resp.NotModified && cached != nil {
		res.NotModified = true
		res.Items = len(cached)
		return cached, nil, true
	}
	items, err := httpsource.Items(resp.Body, spec.ItemsPointer, s.svc.cfg.Limits.RowLimit)
	if err != nil {
		reason := ReasonInvalidBody
		if errors.Is(err, httpsource.ErrTooManyItems) {
			reason = ReasonTooManyItems
		}
		return fail(reason, err)
	}
	res.Items = len(items)
	desired, problems = mapItems(ctx, spec, items, res)
	return desired, problems, true
}

// mapItems maps the items of a source to the resources they describe, by
// name; an item that does not map, and both items of a repeated name, are
// problems (counted in res.InvalidItems), not written.
func mapItems(ctx context.Context, spec httpsource.Spec, items []any, res *srcResult) (map[string]desiredItem, []string) {
	desired := map[string]desiredItem{}
	var problems []string
	seen := map[string]int{}
	// Each item is one render within its own budget: an item past it
	// is invalid, the others are mapped.
	rd := tenancy.NewRenderer()
	for i, item := range items {
		it, err := spec.Map(ctx, rd, item)
		if err != nil {
			problems = append(problems, fmt.Sprintf("item %d: %v", i, err))
			res.InvalidItems++
			continue
		}
		if j, dup := seen[it.Name]; dup {
			problems = append(problems, fmt.Sprintf("item %d: name %q repeats item %d", i, it.Name, j))
			res.InvalidItems++
			delete(desired, it.Name) // neither of two claimants is written
			continue
		}
		seen[it.Name] = i
		desired[it.Name] = desiredItem{Item: it, applied: it.Applied()}
	}
	return desired, problems
}

// liveResources are the resources of current that are not being deleted.
// A desired item whose resource is being deleted is left out of desired
// until it is gone: dropped says one was.
func liveResources(current map[string]*sdk.Resource, desired map[string]desiredItem) (live map[string]*sdk.Resource, dropped bool) {
	live = map[string]*sdk.Resource{}
	for name, c := range current {
		if c.Deleting() {
			if _, ok := desired[name]; ok {
				delete(desired, name)
				dropped = true
			}
			continue
		}
		live[name] = c
	}
	return live, dropped
}

// sourceOps are the writes that make src's resources equal to its items.
func (s *syncer) sourceOps(src *sdk.Resource, spec httpsource.Spec) setsync.Ops[string, desiredItem, *sdk.Resource] {
	return setsync.Ops[string, desiredItem, *sdk.Resource]{
		Equal: func(d desiredItem, c *sdk.Resource) bool {
			if c.Annotations[httpsource.AnnotationApplied] != d.applied || c.Labels[httpsource.LabelSource] != src.Name {
				return false
			}
			for k, v := range d.Labels {
				if c.Labels[k] != v {
					return false
				}
			}
			return strictjson.Covers(c.Spec, d.Spec)
		},
		Create: func(ctx context.Context, name string, d desiredItem) error {
			return s.write(func(f ...apiclient.CallOption) error {
				_, err := s.svc.api.CreateResource(ctx, apiclient.CreateRequest{Namespace: src.Namespace, Name: name,
					ResourceTypeName: spec.Target.TypeName, ResourceTypeVersion: spec.Target.TypeVersion,
					Labels: managedLabels(src.Name, nil, d), Annotations: map[string]string{httpsource.AnnotationApplied: d.applied},
					Spec: d.Spec}, f...)
				return err
			})
		},
		Update: func(ctx context.Context, name string, d desiredItem, c *sdk.Resource) error {
			ann := maps.Clone(c.Annotations)
			if ann == nil {
				ann = map[string]string{}
			}
			ann[httpsource.AnnotationApplied] = d.applied
			labels := managedLabels(src.Name, c.Labels, d)
			return s.write(func(f ...apiclient.CallOption) error {
				_, err := s.svc.api.UpdateResource(ctx, c.ID, apiclient.UpdateRequest{Spec: d.Spec, Labels: &labels, Annotations: &ann,
					ResourceVersion: c.ResourceVersion}, f...)
				return err
			})
		},
		Delete: func(ctx context.Context, name string, c *sdk.Resource) error {
			err := s.write(func(f ...apiclient.CallOption) error {
				_, err := s.svc.api.DeleteResource(ctx, c.ID, f...)
				return ignoreGone(err)
			})
			if err != nil {
				if !errors.Is(err, setsync.ErrStop) {
					s.event(ctx, src, names.EventWarning, EventResourceDeletionFailed, fmt.Sprintf("deleting %s %s failed: %v", spec.Target, name, err))
				}
				return err
			}
			return nil
		},
	}
}

// sourceOutcome sets res's reason and message from problems (an event
// when there are some); it returns false when the items are not to be
// kept for a 304, because some writes failed.
func (s *syncer) sourceOutcome(ctx context.Context, src *sdk.Resource, spec httpsource.Spec, res *srcResult, problems []string, writesFailed bool) (keep bool) {
	keep = true
	switch {
	case res.Deleting:
		res.Reason, res.Message = "Deleting", fmt.Sprintf("deleting %d resources", res.Remaining)
	case len(problems) > 0:
		res.Partial, res.Reason = true, ReasonInvalidItems
		if writesFailed {
			res.Reason = ReasonSourceWrites
			keep = false
		}
		res.Message = fmt.Sprintf("%d problems; the good items were synced and no resource was deleted: %s", len(problems), strings.Join(first(problems, 5), "; "))
		s.event(ctx, src, names.EventWarning, EventInvalidItems, res.Message)
	default:
		res.Reason = ReasonSynced
		res.Message = fmt.Sprintf("%d items = %d %s resources", res.Items, res.Desired, spec.Target)
	}
	return keep
}

// sourceInterval is a source's interval (the default when it does not
// parse).
func sourceInterval(src *sdk.Resource) time.Duration {
	var spec httpsource.Spec
	_ = src.DecodeSpec(&spec)
	return spec.PollInterval()
}

// managedLabels are a managed resource's labels: those it has, the mapped
// ones and the source's.
func managedLabels(source string, have map[string]string, d desiredItem) map[string]string {
	l := maps.Clone(have)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, d.Labels)
	l[httpsource.LabelSource] = source
	return l
}

// countManaged counts the ready and failed resources among the desired
// ones (every one when desired is nil: a failed poll), and those present.
func countManaged(res *srcResult, current map[string]*sdk.Resource, desired map[string]desiredItem) {
	res.Remaining = len(current)
	if desired != nil {
		res.Desired = len(desired)
	} else {
		res.Desired = len(current)
	}
	for name, c := range current {
		if _, ok := desired[name]; !ok && desired != nil {
			continue
		}
		switch c.Status {
		case apiclient.StatusReady:
			res.Ready++
		case apiclient.StatusFailed:
			res.Failed++
		}
	}
}

// listManaged lists the resources src manages, by name.
func (s *syncer) listManaged(ctx context.Context, src *sdk.Resource, target httpsource.Target) (map[string]*sdk.Resource, error) {
	items, err := s.svc.list(ctx, sdk.Type(target.TypeName, target.TypeVersion), src.Namespace, httpsource.LabelSource+"="+src.Name)
	out := make(map[string]*sdk.Resource, len(items))
	for _, r := range items {
		out[r.Name] = r
	}
	return out, err
}

// storedSourceSummary is the summary the source's stored status shows.
func storedSourceSummary(src *sdk.Resource) string {
	var out struct {
		Items        int    `json:"items"`
		Desired      int    `json:"desired"`
		Ready        int    `json:"ready"`
		Failed       int    `json:"failed"`
		InvalidItems int    `json:"invalidItems"`
		SyncedReason string `json:"syncedReason"`
		ETag         string `json:"etag"`
	}
	if len(src.Outputs) == 0 || decodeJSON(src.Outputs, &out) != nil {
		return ""
	}
	return fmt.Sprint((&srcResult{Items: out.Items, Desired: out.Desired, Ready: out.Ready, Failed: out.Failed,
		InvalidItems: out.InvalidItems, Reason: out.SyncedReason, ETag: out.ETag}).summary())
}

// waitSourceResult waits until a result of the source (namespace/name) at
// generation gen or later (and, when deleting, of its deletion) exists,
// kicking the loop; nil when ctx ends first.
func (s *syncer) waitSourceResult(ctx context.Context, name string, gen int64, deleting bool) *srcResult {
	return waitLast(ctx, s, func() *srcResult {
		if st := s.sources[name]; st != nil && st.last != nil && st.last.Generation >= gen && st.last.Deleting == deleting {
			return st.last
		}
		return nil
	})
}

// reconcileSource writes the status of the loop's latest sync of an
// HttpSource; its cleanup waits until the loop has deleted its resources.
func (s *syncer) reconcileSource(ctx context.Context, req *sdk.Request[json.RawMessage]) (sdk.Result, error) {
	r := req.Resource
	wctx, cancel := context.WithTimeout(ctx, waitForSync)
	defer cancel()
	res := s.waitSourceResult(wctx, key(r), r.Generation, r.Deleting())
	if res == nil {
		return sdk.RequeueAfter(2 * time.Second), nil
	}
	if r.Deleting() {
		var spec httpsource.Spec
		if err := r.DecodeSpec(&spec); err != nil {
			return sdk.Result{}, sdk.Terminalf("HttpSource %s: %v", r.Name, err)
		}
		s.Kick()
		left, err := s.listManaged(ctx, r, spec.Target)
		if err != nil {
			return sdk.Result{}, err
		}
		if len(left) > 0 {
			return sdk.RequeueAfter(time.Second), nil
		}
		return sdk.Result{}, nil
	}
	return reportSync(req, syncReport{res.summary(), res.At, res.Duration, res.Err, res.Partial, res.Reason, res.Message})
}
