package registrysync

import (
	"context"
	"crypto/sha256"
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
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/registrysync/datasource"
	"github.com/no8s/no8s/services/registrysync/setsync"
)

const leaseName = tenancy.SyncLease

// Event reasons registry-sync records on a registry.
const (
	EventTenantDeleting       = "TenantDeleting"
	EventTenantDeleted        = "TenantDeleted"
	EventTenantDeletionFailed = "TenantDeletionFailed"
	EventSyncFailed           = "SyncFailed"
	EventInvalidRows          = "InvalidRows"
	EventTenantWriteFailed    = "TenantWriteFailed"
)

// Condition reasons of a registry's Synced condition besides datasource's.
const (
	ReasonSynced      = "Synced"
	ReasonInvalidRows = "InvalidRows"
	ReasonWrites      = "TenantWritesFailed"
)

// result is one sync of one registry.
type result struct {
	Generation           int64
	Deleting             bool
	At                   time.Time
	Duration             time.Duration
	ReferencingTemplates int
	Desired              int
	Ready, Failed        int
	ActiveRows           int
	InvalidRows          int
	Created, Updated     int
	Deleted, Unchanged   int
	// Reason and Message are the Synced condition's; Synced its status.
	Synced          bool
	Reason, Message string
	// Partial: bad rows, or failed writes; the good rows were synced.
	Partial bool
	// Err is a read that failed: nothing was written.
	Err error
	// Remaining is the number of Tenants still present (a deleting
	// registry's or template's cleanup waits for none).
	Remaining int
}

// settled reports whether every desired Tenant is ready or failed.
func (r *result) settled() bool { return r.Err != nil || r.Ready+r.Failed >= r.Desired }

// summary is what the registry's status shows of a result, without its
// times: a sync whose summary equals the stored one writes no status.
func (r *result) summary() map[string]any {
	return map[string]any{
		"referencingTemplates": r.ReferencingTemplates, "desired": r.Desired, "ready": r.Ready, "failed": r.Failed,
		"activeRows": r.ActiveRows, "invalidRows": r.InvalidRows, "syncedReason": r.Reason,
	}
}

// desiredTenant is a Tenant as the rows and templates want it.
type desiredTenant struct {
	uid, template string
	labels        map[string]string
	spec          []byte
}

// currentTenant is a Tenant as listed.
type currentTenant struct {
	res *sdk.Resource
}

// pendingDelete is a Tenant whose deletion was requested and not yet seen
// gone.
type pendingDelete struct{ uid, template string }

// sync makes the registry's Tenants equal to (its templates) × (its active
// rows). A failed read writes nothing; bad rows or failed writes keep every
// Tenant that is not desired (a partial view never deletes).
func (s *syncer) sync(ctx context.Context, reg *sdk.Resource, templates []*sdk.Resource) *result {
	start := time.Now()
	res := &result{Generation: reg.Generation, Deleting: reg.Deleting(), At: start.UTC(), ReferencingTemplates: len(templates)}
	defer func() { res.Duration = time.Since(start) }()
	log := s.log.With("registry", reg.Name, "namespace", reg.Namespace, "generation", reg.Generation)

	var spec tenancy.RegistrySpec
	if err := reg.DecodeSpec(&spec); err != nil {
		res.Err, res.Reason, res.Message = err, datasource.ReasonMapping, err.Error()
		return res
	}
	current, err := s.listTenants(ctx, reg.Namespace, tenancy.LabelRegistry+"="+reg.Name)
	listed := time.Since(start)
	if err != nil {
		res.Err, res.Reason, res.Message = err, "ListFailed", err.Error()
		return res
	}
	desired := map[string]desiredTenant{}
	complete := true
	var readTook time.Duration
	var problems []string
	var inputs [sha256.Size]byte
	if !res.Deleting {
		rows, took, ok := s.readRows(ctx, reg, spec, res, current, log)
		if readTook = took; !ok {
			return res
		}
		inputs = inputsDigest(reg, templates, rows)
		if m := s.memoOf(key(reg)); m.holds(inputs, current) {
			s.unchanged(ctx, reg, res, m, current)
			logSync(log, res, start, listed, readTook, false)
			return res
		}
		desired, problems = s.desired(reg.Name, spec, rows, templates, res)
		complete = len(problems) == 0
	}
	live, dropped := s.liveTenants(ctx, reg, current, desired)
	if dropped {
		complete = false
	}
	out := setsync.Sync(ctx, desired, live, complete, s.svc.cfg.Writes, s.tenantOps(reg, templates, res), strings.Compare)
	res.Created, res.Updated, res.Deleted, res.Unchanged = out.Created, out.Updated, out.Deleted, out.Unchanged
	if out.Stopped != nil {
		res.Err, res.Reason, res.Message = out.Stopped, "Deposed", out.Stopped.Error()
		return res
	}
	var m *memo
	if !res.Deleting && complete && len(out.Failed) == 0 && out.Created+out.Updated+out.Deleted+out.DeletesSkipped == 0 && len(live) == len(current) {
		// Every listed Tenant is desired, live and as desired.
		m = newMemo(inputs, res.ActiveRows, current)
	}
	s.setMemo(key(reg), m)
	for _, k := range slices.Sorted(maps.Keys(out.Failed)) {
		problems = append(problems, fmt.Sprintf("Tenant %s: %v", k, out.Failed[k]))
	}
	s.countStatus(res, current, desired)
	s.syncOutcome(ctx, reg, res, problems, len(out.Failed) > 0)
	logSync(log, res, start, listed, readTook, true)
	if out.Created+out.Updated+out.Deleted > 0 || len(problems) > 0 {
		log.Info("synced", "created", out.Created, "updated", out.Updated, "deleted", out.Deleted, "unchanged", out.Unchanged,
			"kept", out.DeletesSkipped, "problems", len(problems), "duration", time.Since(start))
	}
	return res
}

// logSync writes a sync's debug line (the bench reads it): its counts, how
// long it took since start, its list and its read, and whether it compared
// the desired Tenants with the listed ones.
func logSync(log *slog.Logger, res *result, start time.Time, listed, readTook time.Duration, compared bool) {
	log.Debug("sync", "created", res.Created, "updated", res.Updated, "deleted", res.Deleted, "unchanged", res.Unchanged,
		"desired", res.Desired, "duration_ms", float64(time.Since(start).Microseconds())/1000,
		"list_ms", listed.Milliseconds(), "read_ms", readTook.Milliseconds(), "compared", compared)
}

// readRows reads the registry's rows, and how long the read took. ok is
// false when the read failed: res says why, and nothing is to be written.
func (s *syncer) readRows(ctx context.Context, reg *sdk.Resource, spec tenancy.RegistrySpec, res *result,
	current map[string]currentTenant, log *slog.Logger) (rows []datasource.Row, readTook time.Duration, ok bool) {
	readStart := time.Now()
	rows, err := s.svc.reader.Read(ctx, reg.Namespace, spec)
	readTook = time.Since(readStart)
	if err != nil {
		reason := datasource.ReasonQuery
		var de *datasource.Error
		if errors.As(err, &de) {
			reason = de.Reason
		}
		res.Err, res.Reason, res.Message = err, reason, err.Error()
		s.countStatus(res, current, nil)
		log.Warn("datasource read failed: nothing written", "reason", reason, "error", err)
		s.event(ctx, reg, names.EventWarning, EventSyncFailed, fmt.Sprintf("%s: %v", reason, err))
		return nil, readTook, false
	}
	return rows, readTook, true
}

// unchanged completes res for a sync whose memo m holds: every listed
// Tenant is desired, live and as desired, and nothing is written.
func (s *syncer) unchanged(ctx context.Context, reg *sdk.Resource, res *result, m *memo, current map[string]currentTenant) {
	desired := make(map[string]desiredTenant, len(current))
	for name := range current {
		desired[name] = desiredTenant{}
	}
	res.ActiveRows, res.Unchanged = m.activeRows, len(current)
	s.noteGone(ctx, reg, current)
	s.countStatus(res, current, desired)
	s.syncOutcome(ctx, reg, res, nil, false)
}

// memoOf returns the memo of registry (nil: none).
func (s *syncer) memoOf(registry string) *memo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memos[registry]
}

// setMemo keeps m as registry's memo (nil forgets it).
func (s *syncer) setMemo(registry string, m *memo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m == nil {
		delete(s.memos, registry)
		return
	}
	s.memos[registry] = m
}

// liveTenants are the Tenants of current that are not being deleted (the
// deletions seen finished are noted). Tenants being deleted are neither
// current nor re-created until gone: they leave desired, and dropped says
// one did.
func (s *syncer) liveTenants(ctx context.Context, reg *sdk.Resource, current map[string]currentTenant, desired map[string]desiredTenant) (live map[string]currentTenant, dropped bool) {
	live = map[string]currentTenant{}
	going := map[string]bool{}
	for name, c := range current {
		if c.res.Deleting() {
			going[name] = true
			continue
		}
		live[name] = c
	}
	s.noteGone(ctx, reg, current)
	for name := range desired {
		if going[name] {
			delete(desired, name)
			dropped = true
		}
	}
	return live, dropped
}

// tenantOps are the writes that make the registry's Tenants equal to the
// desired ones.
func (s *syncer) tenantOps(reg *sdk.Resource, templates []*sdk.Resource, res *result) setsync.Ops[string, desiredTenant, currentTenant] {
	templateSet := map[string]bool{}
	for _, t := range templates {
		templateSet[t.Name] = true
	}
	return setsync.Ops[string, desiredTenant, currentTenant]{
		Equal: func(d desiredTenant, c currentTenant) bool {
			return strictjson.Equal(d.spec, c.res.Spec) && c.res.Labels[tenancy.LabelRegistry] == d.labels[tenancy.LabelRegistry] &&
				c.res.Labels[tenancy.LabelTemplate] == d.labels[tenancy.LabelTemplate]
		},
		Create: func(ctx context.Context, name string, d desiredTenant) error {
			return s.write(func(f ...apiclient.CallOption) error {
				_, err := s.svc.api.CreateResource(ctx, apiclient.CreateRequest{Namespace: reg.Namespace, Name: name,
					ResourceTypeName: tenancy.TenantType, ResourceTypeVersion: tenancy.Version, Labels: d.labels, Spec: d.spec}, f...)
				return err
			})
		},
		Update: func(ctx context.Context, name string, d desiredTenant, c currentTenant) error {
			labels := maps.Clone(c.res.Labels)
			if labels == nil {
				labels = map[string]string{}
			}
			maps.Copy(labels, d.labels)
			return s.write(func(f ...apiclient.CallOption) error {
				_, err := s.svc.api.UpdateResource(ctx, c.res.ID, apiclient.UpdateRequest{Spec: d.spec, Labels: &labels, ResourceVersion: c.res.ResourceVersion}, f...)
				return err
			})
		},
		Delete: func(ctx context.Context, name string, c currentTenant) error {
			uid, tpl := "", c.res.Labels[tenancy.LabelTemplate]
			var ts tenancy.TenantSpec
			if c.res.DecodeSpec(&ts) == nil {
				uid = ts.UID
			}
			why := "its row is gone or no longer active"
			switch {
			case res.Deleting:
				why = "the registry is being deleted"
			case !templateSet[tpl]:
				why = fmt.Sprintf("template %s no longer references the registry", tpl)
			}
			s.event(ctx, reg, names.EventNormal, EventTenantDeleting, fmt.Sprintf("deleting Tenant %s (uid %q, template %s): %s", name, uid, tpl, why))
			err := s.write(func(f ...apiclient.CallOption) error {
				_, err := s.svc.api.DeleteResource(ctx, c.res.ID, f...)
				return ignoreGone(err)
			})
			if err != nil {
				if !errors.Is(err, setsync.ErrStop) {
					s.event(ctx, reg, names.EventWarning, EventTenantDeletionFailed, fmt.Sprintf("deleting Tenant %s failed: %v", name, err))
				}
				return err
			}
			s.markPending(key(reg), name, pendingDelete{uid: uid, template: tpl})
			return nil
		},
	}
}

// syncOutcome sets res's outcome from problems (an event when there are
// some); writesFailed says some of them are failed writes.
func (s *syncer) syncOutcome(ctx context.Context, reg *sdk.Resource, res *result, problems []string, writesFailed bool) {
	switch {
	case res.Deleting:
		res.Synced, res.Reason, res.Message = true, "Deleting", fmt.Sprintf("deleting %d Tenants", res.Remaining)
	case len(problems) > 0:
		res.Partial = true
		res.Reason = ReasonInvalidRows
		if writesFailed {
			res.Reason = ReasonWrites
		}
		res.Message = fmt.Sprintf("%d problems; the good rows were synced and no Tenant was deleted: %s", len(problems), strings.Join(first(problems, 5), "; "))
		s.event(ctx, reg, names.EventWarning, EventInvalidRows, res.Message)
	default:
		res.Synced, res.Reason = true, ReasonSynced
		res.Message = fmt.Sprintf("%d active rows × %d templates = %d Tenants", res.ActiveRows, res.ReferencingTemplates, res.Desired)
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// desired computes the desired Tenants of the active rows and templates,
// and the problems of bad rows (each reported, none fatal).
func (s *syncer) desired(registry string, spec tenancy.RegistrySpec, rows []datasource.Row, templates []*sdk.Resource, res *result) (map[string]desiredTenant, []string) {
	var problems []string
	type row struct {
		uid, host, activate string
		extra               map[string]string
	}
	var active []row
	seen := map[string]int{}
	for i, r := range rows {
		if r.UID == nil || strings.TrimSpace(*r.UID) == "" {
			problems = append(problems, fmt.Sprintf("row %d: the uid column %q is NULL or empty", i+1, spec.ValueMappings.UID))
			res.InvalidRows++
			continue
		}
		if !tenancy.Truthy(r.Activate) {
			continue
		}
		if j, dup := seen[*r.UID]; dup {
			problems = append(problems, fmt.Sprintf("row %d: uid %q repeats row %d", i+1, *r.UID, j))
			res.InvalidRows++
			continue
		}
		seen[*r.UID] = i + 1
		x := row{uid: *r.UID, activate: deref(r.Activate), host: deref(r.HostOrURL), extra: map[string]string{}}
		for k, v := range r.Extra {
			x.extra[k] = deref(v)
		}
		active = append(active, x)
	}
	res.ActiveRows = len(active)
	out := map[string]desiredTenant{}
	for _, t := range templates {
		var ts tenancy.TemplateSpec
		if err := t.DecodeSpec(&ts); err != nil {
			problems = append(problems, fmt.Sprintf("template %s: %v", t.Name, err))
			continue
		}
		var raw struct {
			Resources []json.RawMessage `json:"resources"`
		}
		_ = json.Unmarshal(t.Spec, &raw)
		if raw.Resources == nil {
			raw.Resources = []json.RawMessage{}
		}
		for _, r := range active {
			name := tenancy.TenantName(r.uid, t.Name)
			if prev, clash := out[name]; clash {
				problems = append(problems, fmt.Sprintf("uid %q with template %s and uid %q with template %s both map to Tenant %s", r.uid, t.Name, prev.uid, prev.template, name))
				continue
			}
			spec, err := resource.Marshal(tenancy.TenantSpec{
				RegistryID: registry, TemplateRef: t.Name, UID: r.uid,
				Values:    tenancy.RowValues(registry, t.Name, r.uid, r.host, r.activate, r.extra),
				Resources: raw.Resources,
			})
			if err != nil {
				problems = append(problems, fmt.Sprintf("uid %q: %v", r.uid, err))
				continue
			}
			out[name] = desiredTenant{uid: r.uid, template: t.Name, spec: spec,
				labels: map[string]string{tenancy.LabelRegistry: registry, tenancy.LabelTemplate: t.Name}}
		}
	}
	res.Desired = len(out)
	return out, problems
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// countStatus counts the ready and failed Tenants among the desired ones,
// and those still present.
func (s *syncer) countStatus(res *result, current map[string]currentTenant, desired map[string]desiredTenant) {
	res.Remaining = len(current)
	if res.Err == nil {
		res.Desired = len(desired)
	}
	for name, c := range current {
		if _, ok := desired[name]; !ok && res.Err == nil {
			continue
		}
		switch c.res.Status {
		case apiclient.StatusReady:
			res.Ready++
		case apiclient.StatusFailed:
			res.Failed++
		}
	}
}

// event records an Event on the registry (fenced; failures are logged).
func (s *syncer) event(ctx context.Context, reg *sdk.Resource, typ, reason, msg string) {
	if !s.term.Valid() {
		return
	}
	err := s.write(func(f ...apiclient.CallOption) error {
		_, err := s.svc.api.RecordEvent(ctx, reg.ID, apiclient.EventRecordCreate{Type: typ, Reason: reason, Message: names.TruncateEventMessage(msg), Source: leaseName}, f...)
		return err
	})
	if err != nil {
		s.log.Warn("recording an event failed", "registry", reg.Name, "reason", reason, "error", err)
	}
}

// markPending remembers a requested deletion until the Tenant is gone.
func (s *syncer) markPending(registry, name string, p pendingDelete) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[registry] == nil {
		s.pending[registry] = map[string]pendingDelete{}
	}
	s.pending[registry][name] = p
}

// noteGone records TenantDeleted for requested deletions no longer listed.
func (s *syncer) noteGone(ctx context.Context, reg *sdk.Resource, current map[string]currentTenant) {
	s.mu.Lock()
	var gone []string
	for name := range s.pending[key(reg)] {
		if _, ok := current[name]; !ok {
			gone = append(gone, name)
		}
	}
	for _, name := range gone {
		delete(s.pending[key(reg)], name)
	}
	s.mu.Unlock()
	for _, name := range slices.Sorted(slices.Values(gone)) {
		s.event(ctx, reg, names.EventNormal, EventTenantDeleted, fmt.Sprintf("Tenant %s is gone", name))
	}
}

// listTenants lists the Tenants of namespace matching selector, by name.
func (s *syncer) listTenants(ctx context.Context, namespace, selector string) (map[string]currentTenant, error) {
	out := map[string]currentTenant{}
	items, err := s.svc.list(ctx, sdk.Type(tenancy.TenantType, tenancy.Version), namespace, selector)
	for _, r := range items {
		out[r.Name] = currentTenant{res: r}
	}
	return out, err
}
