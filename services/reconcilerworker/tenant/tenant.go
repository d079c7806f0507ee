package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// Name is the reconciler's registered name; its finalizer is
// reconciler.no8s.io/tenant.
const Name = tenancy.Reconciler

// Type is the type it serves.
var Type = sdk.Type(tenancy.TenantType, tenancy.Version)

// The Events it records on Tenants.
const (
	EventReady           = "Ready"
	EventDegraded        = "Degraded"
	EventDependencyCycle = "DependencyCycle"
	EventApplyConflict   = "ApplyConflict"
)

// The outputs it writes on Tenants.
const (
	OutputDesired  = "desiredResources"
	OutputReady    = "readyResources"
	OutputFailed   = "failedResources"
	OutputChildren = "children"
)

// DefaultReadyPoll is how soon, at the latest, an attempt comes back while
// a child it applies again once gone, or removes, is not gone yet. It is a
// safety net: the reconciler owns its children (Engine.OwnsAnyType), so a
// child's change, readiness or purge reconciles the Tenant at once.
const DefaultReadyPoll = 30 * time.Second

// Config configures the reconciler.
type Config struct {
	// API is the public REST API, through which every child is written.
	API *client.Client
	// ReadyPoll is how soon, at the latest, an attempt comes back while it
	// waits for a child to be gone (default DefaultReadyPoll; whole
	// seconds). A child not ready yet is waited for without polling: its
	// changes reconcile the Tenant, and one requeue comes at the end of its
	// timeoutSeconds.
	ReadyPoll time.Duration
	// Metrics is where the reconciler records its own series
	// (no8s_tenant_reconcile_duration_seconds, no8s_apply_attempts_total);
	// nil records nothing.
	Metrics prometheus.Registerer
}

// New returns the tenant reconciler.
func New(cfg Config) *sdk.Engine[tenancy.TenantSpec] {
	if cfg.ReadyPoll <= 0 {
		cfg.ReadyPoll = DefaultReadyPoll
	}
	r := &reconciler{cfg: cfg, renderer: tenancy.NewRenderer(), m: newTenantMetrics(cfg.Metrics)}
	return sdk.New(Name, sdk.StepFuncs[tenancy.TenantSpec]{StepName: "children", DoFunc: r.timedDo, CleanupFunc: r.cleanup}).
		OwnsAnyType()
}

type reconciler struct {
	cfg Config
	m   *tenantMetrics
	// renderer is the one renderer (tenancy's), its function map built
	// once.
	renderer *tenancy.Renderer
}

// Child states, in the outputs.
const (
	StateReady    = "Ready"
	StateWaiting  = "Waiting"  // applied, not ready yet
	StatePending  = "Pending"  // not applied: a dependency is not ready
	StateFailed   = "Failed"   // conflict, timeout, render or apply error
	StateDeleting = "Deleting" // being deleted (by hand, or a removal)
)

// child is what a Tenant's outputs remember of one child, by template id.
type child struct {
	ID             string `json:"id"`
	TypeName       string `json:"typeName"`
	TypeVersion    string `json:"typeVersion"`
	Name           string `json:"name"`
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
	// Created: this Tenant created the child or took it over.
	Created bool   `json:"created,omitempty"`
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
	// WaitingSince is when the child was applied or first seen not ready:
	// timeoutSeconds counts from it.
	WaitingSince *time.Time `json:"waitingSince,omitempty"`
}

func (c child) typeRef() sdk.TypeRef { return sdk.Type(c.TypeName, c.TypeVersion) }

func (c child) String() string {
	return fmt.Sprintf("%s %s/%s %q", c.ID, c.TypeName, c.TypeVersion, c.Name)
}

// previous reads the children recorded by the last attempt.
func previous(res *sdk.Resource) map[string]child {
	var out struct {
		Children []child `json:"children"`
	}
	_ = json.Unmarshal(res.Outputs, &out)
	m := make(map[string]child, len(out.Children))
	for _, c := range out.Children {
		m[c.ID] = c
	}
	return m
}

// decodeResources decodes the Tenant's resources.
func decodeResources(spec tenancy.TenantSpec) ([]tenancy.TResource, error) {
	out := make([]tenancy.TResource, len(spec.Resources))
	for i, raw := range spec.Resources {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("spec.resources[%d]: %w", i, err)
		}
	}
	return out, nil
}

// ownerRef is the owner reference every child of req's Tenant carries.
func ownerRef(res *sdk.Resource) resource.OwnerReference {
	return resource.OwnerReference{UID: res.UID, ResourceTypeName: tenancy.TenantType, ResourceTypeVersion: tenancy.Version,
		Name: res.Name, Controller: true, BlockOwnerDeletion: true}
}

// setStatus writes the outputs.
func setStatus(req *sdk.Request[tenancy.TenantSpec], desired int, children []child) {
	ready, failed := 0, 0
	for _, c := range children {
		switch c.State {
		case StateReady:
			ready++
		case StateFailed:
			failed++
		}
	}
	req.SetOutput(OutputDesired, desired)
	req.SetOutput(OutputReady, ready)
	req.SetOutput(OutputFailed, failed)
	req.SetOutput(OutputChildren, children)
}

// keep lists the previous children in id order (they stay tracked while
// nothing could be applied).
func keep(prev map[string]child) []child {
	out := slices.Collect(maps.Values(prev))
	slices.SortFunc(out, func(a, b child) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (r *reconciler) do(ctx context.Context, req *sdk.Request[tenancy.TenantSpec]) (sdk.Result, error) {
	res := req.Resource
	prev := previous(res)
	rs, order, err := plan(req, prev)
	if err != nil {
		return sdk.Result{}, err
	}
	rendered, err := r.renderAll(ctx, req, rs, prev)
	if err != nil {
		return sdk.Result{}, err
	}
	owner := ownerRef(res)
	pr := progress{children: make([]child, len(rs)), ready: map[string]bool{}, desired: map[string]bool{}}
	if err := r.applyChildren(ctx, req, rs, rendered, order, prev, owner, &pr); err != nil {
		return sdk.Result{}, err
	}
	if err := r.removeDropped(ctx, req, prev, owner, &pr); err != nil {
		return sdk.Result{}, err
	}
	setStatus(req, len(rs), pr.children)
	if len(pr.failed) > 0 {
		msg := strings.Join(pr.failed, "; ")
		req.Event(names.EventWarning, EventDegraded, msg)
		return sdk.Result{}, sdk.Degraded(errors.New(msg))
	}
	if pr.waiting {
		return sdk.RequeueAfter(r.recheck(req.Now(), &pr)), nil
	}
	if was, ok := res.Condition(conditions.Ready); !ok || !was.IsTrue() {
		req.Event(names.EventNormal, EventReady, fmt.Sprintf("all %d resources are ready", len(rs)))
	}
	return sdk.Result{}, nil
}

// progress is what applying a Tenant's children found.
type progress struct {
	// children are the children's states, in the Tenant's order, then the
	// dropped ones still being removed.
	children []child
	// ready are the ids of the ready children; desired those of the
	// previous children still rendered as the same resource.
	ready, desired map[string]bool
	// failed are the messages of the failed children.
	failed []string
	// waiting: a child is neither ready nor failed yet.
	waiting bool
	// deadline is the earliest end of a waiting child's timeoutSeconds;
	// gone, whether a child is waited for to be gone (no deadline).
	deadline time.Time
	gone     bool
}

// recheck is how soon an attempt that waits comes back: just after the
// earliest timeout ends, or ReadyPoll while a child is waited for to be
// gone, whichever is first. Until then the children's changes reconcile
// the Tenant (it owns them), so nothing polls.
func (r *reconciler) recheck(now time.Time, pr *progress) time.Duration {
	wait := r.cfg.ReadyPoll
	if !pr.deadline.IsZero() {
		// The timeout is exceeded strictly after it ends; whole seconds.
		untilTimeout := pr.deadline.Sub(now).Truncate(time.Second) + time.Second
		if !pr.gone || untilTimeout < wait {
			wait = untilTimeout
		}
	}
	return max(wait, time.Second)
}

// plan decodes the Tenant's resources and orders them by their
// dependencies. On failure the status keeps the previous children, an
// event says why, and the error is Degraded.
func plan(req *sdk.Request[tenancy.TenantSpec], prev map[string]child) ([]tenancy.TResource, []int, error) {
	rs, err := decodeResources(req.Spec)
	if err != nil {
		setStatus(req, len(req.Spec.Resources), keep(prev))
		req.Event(names.EventWarning, EventDegraded, err.Error())
		return nil, nil, sdk.Degraded(err)
	}
	order, err := tenancy.Order(rs)
	if err != nil {
		setStatus(req, len(rs), keep(prev))
		reason := EventDegraded
		var ce *tenancy.CycleError
		if errors.As(err, &ce) {
			reason = EventDependencyCycle
		}
		req.Event(names.EventWarning, reason, err.Error())
		return nil, nil, sdk.Degraded(err)
	}
	return rs, order, nil
}

// renderAll renders every resource first: a template error anywhere
// applies nothing (the status keeps the previous children, and the error
// is Degraded).
func (r *reconciler) renderAll(ctx context.Context, req *sdk.Request[tenancy.TenantSpec], rs []tenancy.TResource, prev map[string]child) ([]*tenancy.Rendered, error) {
	values := tenancy.Values(req.Spec.Values)
	rendered := make([]*tenancy.Rendered, len(rs))
	var renderErrs []string
	renderCtx, cancel := r.renderer.Bound(ctx)
	defer cancel()
	for i, tr := range rs {
		out, err := r.renderer.Render(renderCtx, tr, values)
		if err != nil {
			renderErrs = append(renderErrs, fmt.Sprintf("resource %q: %v", tr.ID, err))
			continue
		}
		out.Labels[tenancy.LabelTenant] = req.Resource.Name
		if tr.Once() {
			out.Annotations[tenancy.AnnotationCreatedOnce] = "true"
		}
		rendered[i] = out
	}
	if len(renderErrs) > 0 {
		msg := "template rendering failed, nothing applied: " + strings.Join(renderErrs, "; ")
		children := keep(prev)
		setStatus(req, len(rs), children)
		req.SetOutput(OutputFailed, len(renderErrs))
		req.Event(names.EventWarning, EventDegraded, msg)
		return nil, sdk.Degraded(errors.New(msg))
	}
	return rendered, nil
}

// applyChildren brings each child, in dependency order, toward its
// rendered state; a child whose dependencies are not all ready waits
// (StatePending). An error is a failure of the attempt.
func (r *reconciler) applyChildren(ctx context.Context, req *sdk.Request[tenancy.TenantSpec], rs []tenancy.TResource, rendered []*tenancy.Rendered,
	order []int, prev map[string]child, owner resource.OwnerReference, pr *progress) error {
	now := req.Now()
	for _, i := range order {
		tr, want := rs[i], rendered[i]
		c := child{ID: tr.ID, TypeName: tr.TypeName, TypeVersion: tr.TypeVersion, Name: want.Name, DeletionPolicy: tr.DeletionPolicy}
		p, seen := prev[tr.ID]
		if seen && p.TypeName == c.TypeName && p.TypeVersion == c.TypeVersion && p.Name == c.Name {
			c.Created, c.WaitingSince = p.Created, p.WaitingSince
			pr.desired[tr.ID] = true
		}
		if blockers := notReady(tr.DependIDs, pr.ready); len(blockers) > 0 {
			c.State, c.Message = StatePending, "waiting for "+strings.Join(blockers, ", ")
			pr.children[i] = c
			continue
		}
		if err := r.sync(ctx, req, tr, want, owner, now, &c); err != nil {
			return err
		}
		switch c.State {
		case StateReady:
			pr.ready[tr.ID] = true
		case StateFailed:
			pr.failed = append(pr.failed, c.Message)
		case StateWaiting:
			pr.waiting = true
			if end := c.WaitingSince.Add(tr.Timeout()); pr.deadline.IsZero() || end.Before(pr.deadline) {
				pr.deadline = end
			}
		default:
			pr.waiting, pr.gone = true, true
		}
		pr.children[i] = c
	}
	return nil
}

// notReady are the ids of ids that are not ready.
func notReady(ids []string, ready map[string]bool) []string {
	var out []string
	for _, d := range ids {
		if !ready[d] {
			out = append(out, d)
		}
	}
	return out
}

// removeDropped removes, by their deletionPolicy, the children no longer
// rendered (dropped from the template, or renamed); one not gone yet stays
// a child, StateDeleting.
func (r *reconciler) removeDropped(ctx context.Context, req *sdk.Request[tenancy.TenantSpec], prev map[string]child, owner resource.OwnerReference, pr *progress) error {
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		if pr.desired[id] {
			continue
		}
		p := prev[id]
		gone, err := r.remove(ctx, req, p, owner)
		if err != nil {
			return err
		}
		if !gone {
			p.State, p.Message = StateDeleting, "no longer in the template: being removed ("+policyName(p.DeletionPolicy)+")"
			pr.children = append(pr.children, p)
			pr.waiting, pr.gone = true, true
		}
	}
	return nil
}

func policyName(p string) string {
	if p == "" {
		return tenancy.DeletionDelete
	}
	return p
}

// sync brings one child toward its rendered state and records its state in
// c. An error is a failure of the attempt (retried); a policy failure
// (conflict, timeout) is c.State StateFailed.
func (r *reconciler) sync(ctx context.Context, req *sdk.Request[tenancy.TenantSpec], tr tenancy.TResource, want *tenancy.Rendered,
	owner resource.OwnerReference, now time.Time, c *child) error {
	cur, err := r.get(ctx, req, c.typeRef(), c.Name)
	if err != nil {
		return err
	}
	desc := fmt.Sprintf("%s/%s %q (resource %q)", c.TypeName, c.TypeVersion, c.Name, c.ID)
	if cur != nil && cur.deleting {
		c.State, c.Message, c.WaitingSince = StateDeleting, desc+" is being deleted; it is applied again once gone", nil
		return nil
	}
	act := decide(tr, cur, c.Created, want, owner.UID)
	switch act {
	case actSkipGone:
		c.State, c.Message = StateReady, desc+": creationPolicy Once, deleted since it was created: left alone"
		return nil
	case actConflict:
		r.m.applied(c.TypeName, "conflict", tr.ConflictPolicy)
		c.State = StateFailed
		c.Message = fmt.Sprintf("%s exists with %s: conflictPolicy Stuck leaves it alone", desc, ownersOf(cur.owners))
		req.Event(names.EventWarning, EventApplyConflict, c.Message)
		return nil
	case actKeep, actNone:
	case actTakeOver:
		req.Event(names.EventNormal, EventApplyConflict, fmt.Sprintf("%s exists with %s: conflictPolicy Force takes it over", desc, ownersOf(cur.owners)))
		fallthrough
	case actCreate, actUpdate:
		next, err := r.write(ctx, req, tr, want, owner, cur)
		if err != nil {
			r.m.applied(c.TypeName, "error", tr.ConflictPolicy)
			return fmt.Errorf("%s: %s: %w", desc, act, err)
		}
		r.m.applied(c.TypeName, act.result(), tr.ConflictPolicy)
		if act != actUpdate {
			c.Created = true
		}
		if cur == nil || next.generation != cur.generation {
			c.WaitingSince = nil
		}
		cur = next
	}
	if cur.ready || !tr.Wait() {
		c.State, c.Message, c.WaitingSince = StateReady, "", nil
		return nil
	}
	if c.WaitingSince == nil {
		// Whole seconds in the status, rounded up: rounded down, the
		// wait would look up to a second longer than it is, and the
		// timeout could fire before timeoutSeconds had passed.
		t := now.UTC().Truncate(time.Second)
		if t.Before(now) {
			t = t.Add(time.Second)
		}
		c.WaitingSince = &t
	}
	if waited := now.Sub(*c.WaitingSince); waited > tr.Timeout() {
		c.State = StateFailed
		c.Message = fmt.Sprintf("%s not ready after %s (timeoutSeconds %d)", desc, waited.Truncate(time.Second), int(tr.Timeout().Seconds()))
		return nil
	}
	c.State, c.Message = StateWaiting, desc+" is not ready yet"
	return nil
}

// ownersOf describes owner references for a conflict message.
func ownersOf(owners []resource.OwnerReference) string {
	if len(owners) == 0 {
		return "no owner"
	}
	var parts []string
	for _, o := range owners {
		parts = append(parts, fmt.Sprintf("%s/%s %q", o.ResourceTypeName, o.ResourceTypeVersion, o.Name))
	}
	return "another owner (" + strings.Join(parts, ", ") + ")"
}

// get reads a child by name through the workers' door; nil when it does
// not exist.
func (r *reconciler) get(ctx context.Context, req *sdk.Request[tenancy.TenantSpec], t sdk.TypeRef, name string) (*view, error) {
	if req.Client == nil {
		return nil, fmt.Errorf("read %s %q: the request has no store client", t, name)
	}
	got, err := req.Client.GetByName(ctx, t, req.Namespace(), name)
	if errors.Is(err, sdk.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %q: %w", t, name, err)
	}
	return viewOfSDK(got), nil
}

func viewOfSDK(r *sdk.Resource) *view {
	v := &view{id: r.ID, resourceVersion: r.ResourceVersion, generation: r.Generation, labels: r.Labels, annotations: r.Annotations,
		spec: r.Spec, deleting: r.Deleting()}
	for _, o := range r.OwnerReferences {
		v.owners = append(v.owners, resource.OwnerReference{UID: o.UID, ResourceTypeName: o.Type.Name, ResourceTypeVersion: o.Type.Version,
			Name: o.Name, Controller: o.Controller, BlockOwnerDeletion: o.BlockOwnerDeletion})
	}
	if c, ok := r.Condition(conditions.Ready); ok && c.IsTrue() && c.ObservedGeneration >= r.Generation {
		v.ready = true
	}
	return v
}

func viewOfAPI(r *client.Resource) *view {
	v := &view{id: r.ID, resourceVersion: r.ResourceVersion, generation: r.Generation, labels: r.Labels, annotations: r.Annotations,
		owners: r.OwnerReferences, spec: r.Spec, deleting: r.DeletedAt != nil}
	for _, c := range r.Conditions {
		if c.Type == conditions.Ready && c.Status == string(conditions.True) && c.ObservedGeneration >= r.Generation {
			v.ready = true
		}
	}
	return v
}

// write creates or updates a child by tr's patch strategy, this Tenant
// its owner: on a take-over (cur not owned) its only owner, else beside
// the owners it has.
func (r *reconciler) write(ctx context.Context, req *sdk.Request[tenancy.TenantSpec], tr tenancy.TResource, want *tenancy.Rendered,
	owner resource.OwnerReference, cur *view) (*view, error) {
	owners := []resource.OwnerReference{owner}
	labels, annotations := maps.Clone(want.Labels), maps.Clone(want.Annotations)
	if cur != nil {
		if cur.ownedBy(owner.UID) {
			owners = cur.owners
		}
		labels, annotations = merged(cur.labels, want.Labels), merged(cur.annotations, want.Annotations)
	}
	var out *client.Resource
	var err error
	switch {
	case tr.Patch() == tenancy.PatchApply:
		out, _, err = r.cfg.API.Apply(ctx, client.ApplyRequest{Namespace: req.Namespace(), Name: want.Name,
			ResourceTypeName: tr.TypeName, ResourceTypeVersion: tr.TypeVersion, Spec: want.Spec,
			Labels: &labels, Annotations: &annotations, OwnerReferences: &owners})
	case cur == nil:
		out, err = r.cfg.API.CreateResource(ctx, client.CreateRequest{Namespace: req.Namespace(), Name: want.Name,
			ResourceTypeName: tr.TypeName, ResourceTypeVersion: tr.TypeVersion, Spec: want.Spec,
			Labels: labels, Annotations: annotations, OwnerReferences: owners})
	case tr.Patch() == tenancy.PatchMerge:
		// No resource_version: the gateway merges the patch again into a
		// state that changed meanwhile (a status write of the child's
		// reconciler), and the patch does not depend on what it read.
		patch, merr := json.Marshal(map[string]any{"spec": json.RawMessage(want.Spec), "labels": want.Labels, "annotations": want.Annotations,
			"owner_references": owners})
		if merr != nil {
			return nil, merr
		}
		out, err = r.cfg.API.PatchResource(ctx, cur.id, patch)
	default: // replace
		out, err = r.cfg.API.UpdateResource(ctx, cur.id, client.UpdateRequest{Spec: want.Spec, Labels: &labels, Annotations: &annotations,
			OwnerReferences: &owners, ResourceVersion: cur.resourceVersion})
	}
	if err != nil {
		return nil, err
	}
	return viewOfAPI(out), nil
}

// merged is have with want's entries set.
func merged(have, want map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}

// remove applies a child's deletionPolicy: Delete deletes it (gone reports
// whether it is gone yet), Retain drops this Tenant's owner reference and
// keeps it. A child this Tenant does not own (any more) is left alone.
func (r *reconciler) remove(ctx context.Context, req *sdk.Request[tenancy.TenantSpec], c child, owner resource.OwnerReference) (gone bool, err error) {
	cur, err := r.get(ctx, req, c.typeRef(), c.Name)
	if err != nil || cur == nil {
		return cur == nil, err
	}
	if !cur.ownedBy(owner.UID) {
		return true, nil
	}
	if c.DeletionPolicy == tenancy.DeletionRetain {
		kept := slices.DeleteFunc(slices.Clone(cur.owners), func(o resource.OwnerReference) bool { return o.UID == owner.UID })
		patch, err := json.Marshal(map[string]any{"owner_references": orNone(kept)})
		if err != nil {
			return false, err
		}
		if _, err := r.cfg.API.PatchResource(ctx, cur.id, patch); err != nil {
			return false, fmt.Errorf("retain %s: drop the owner reference: %w", c, err)
		}
		return true, nil
	}
	if !cur.deleting {
		if _, err := r.cfg.API.DeleteResource(ctx, cur.id); err != nil && !client.IsNotFound(err) {
			return false, fmt.Errorf("delete %s: %w", c, err)
		}
	}
	return false, nil
}

func orNone(l []resource.OwnerReference) []resource.OwnerReference {
	if l == nil {
		return []resource.OwnerReference{}
	}
	return l
}

// cleanup runs when the Tenant is deleted: every child it recorded or
// renders now is removed by its deletionPolicy; the finalizer goes (the
// engine removes it) once every Delete child is gone.
func (r *reconciler) cleanup(ctx context.Context, req *sdk.Request[tenancy.TenantSpec]) (sdk.Result, error) {
	res := req.Resource
	all := previous(res)
	if rs, err := decodeResources(req.Spec); err == nil {
		for _, tr := range rs {
			if _, ok := all[tr.ID]; ok {
				continue
			}
			// Not recorded (an attempt that created it ended before its
			// outputs were saved): found by its rendered name, if any.
			if out, err := r.renderer.Render(ctx, tr, tenancy.Values(req.Spec.Values)); err == nil {
				all[tr.ID] = child{ID: tr.ID, TypeName: tr.TypeName, TypeVersion: tr.TypeVersion, Name: out.Name, DeletionPolicy: tr.DeletionPolicy}
			}
		}
	}
	owner := ownerRef(res)
	var left []child
	for _, id := range slices.Sorted(maps.Keys(all)) {
		c := all[id]
		gone, err := r.remove(ctx, req, c, owner)
		if err != nil {
			return sdk.Result{}, err
		}
		if !gone {
			c.State, c.Message = StateDeleting, "the Tenant is being deleted"
			left = append(left, c)
		}
	}
	setStatus(req, len(all), left)
	if len(left) > 0 {
		return sdk.RequeueAfter(r.cfg.ReadyPoll), nil
	}
	return sdk.Result{}, nil
}

// NewAPIClient returns a client of the REST API at apiURL fit for the
// reconciler: requests bounded to 30 s, and enough idle connections for
// every concurrent attempt.
//
// With creds (at most one; the reconciler's identity, reconciler/tenant)
// and an https apiURL, the gateway's service listener, the client presents
// them: the gateway then lets it write the tenants.no8s.io/ labels and
// annotations of children (authz.Reserved). Without them, token ("" none)
// is its bearer token on the public listener.
func NewAPIClient(apiURL, token string, creds ...*identity.Credentials) (*client.Client, error) {
	var id *identity.Credentials
	if len(creds) > 0 {
		id = creds[0]
	}
	c, err := client.New(apiURL, client.WithTimeout(30*time.Second), client.WithUserAgent("no8s-tenant-reconciler"), client.WithToken(token),
		client.WithHTTPClient(authz.GatewayHTTPClient(id, apiURL)))
	if err != nil {
		return nil, fmt.Errorf("tenant reconciler: --api-url: %w", err)
	}
	return c, nil
}
