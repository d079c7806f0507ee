package gateway

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
)

// HeaderApplyResult says what an apply did: created, configured (changed)
// or unchanged.
const HeaderApplyResult = client.HeaderApplyResult

// The values of HeaderApplyResult.
const (
	ApplyCreated    = client.ApplyCreated
	ApplyConfigured = client.ApplyConfigured
	ApplyUnchanged  = client.ApplyUnchanged
)

// applyResourceBody is the body of POST /api/v1/resources/apply: the
// resource as it should be (libs/client's ApplyRequest). Labels,
// annotations and owner references, when given, replace the stored ones;
// when omitted, the stored ones are kept.
type applyResourceBody = client.ApplyRequest

// applyResource is POST /api/v1/resources/apply: applyOp behind the HTTP
// edge.
func (s *Service) applyResource(c *echo.Context) error {
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	var body applyResourceBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	out, err := s.applyOp(c.Request().Context(), body, dry)
	if err != nil {
		return err
	}
	for k, v := range out.header() {
		c.Response().Header().Set(k, v)
	}
	return writeJSON(c, out.status(), out.doc)
}

// applied is what an apply did: its result (ApplyCreated, ApplyConfigured
// or ApplyUnchanged) and the resource as stored (or as it would be, on a
// dry run).
type applied struct {
	result string
	doc    *resource.Resource
	dry    bool
}

// status is the HTTP status of the answer: 201 for a create, else 200.
func (a applied) status() int {
	if a.result == ApplyCreated {
		return http.StatusCreated
	}
	return http.StatusOK
}

// header is the answer's headers: X-Apply-Result, and Location for a
// resource created for real.
func (a applied) header() map[string]string {
	h := map[string]string{HeaderApplyResult: a.result}
	if a.result == ApplyCreated && !a.dry && a.doc != nil && a.doc.ID != 0 {
		h[echo.HeaderLocation] = "/api/v1/resources/" + strconv.FormatInt(a.doc.ID, 10)
	}
	return h
}

// applyOp is server-side apply, the one implementation that HTTP and the
// queue input call: it creates the resource named by (type, version,
// namespace, name) or updates it to the given spec, labels and
// annotations, through admission like every write. Applying what is stored
// changes nothing (same generation, same resource_version, no event). A
// conflicting concurrent write (409 conflict, or name_taken when two
// applies create at once) is retried against the newer state until the
// request's deadline (raceRetry).
func (s *Service) applyOp(ctx context.Context, body applyResourceBody, dry bool) (applied, error) {
	body.Namespace = names.OrDefault(body.Namespace)
	want, err := checkApply(&body)
	if err != nil {
		return applied{}, err
	}
	key := &storev1.ResourceName{ResourceTypeName: body.ResourceTypeName, ResourceTypeVersion: body.ResourceTypeVersion,
		Namespace: body.Namespace, Name: body.Name}
	// Decided by name before anything is read: an object the caller may
	// not write answers as an absent one does.
	if err := s.authorizeByName(ctx, body.ResourceTypeName, body.Namespace, body.Name, rbac.VerbCreate, rbac.VerbUpdate); err != nil {
		return applied{}, err
	}
	retry := s.raceRetry(ctx)
	for {
		resp, err := callCtx(s, ctx, s.store.GetResource, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: key}})
		if pe := problem.As(err); pe != nil && pe.Kind == problem.NotFound {
			a, err := s.applyCreate(ctx, &body, &want, dry)
			if pe := problem.As(err); pe != nil && pe.Code == problem.CodeNameTaken {
				// Created meanwhile: update it instead.
				if err := retry.again(err); err != nil {
					return applied{}, err
				}
				continue
			}
			return a, err
		}
		if err != nil {
			return applied{}, err
		}
		// A refusal of the stored object is final: its 404 is not the
		// purge the retry below waits out.
		if err := s.authorizeStored(ctx, rbac.VerbUpdate, resp.GetResource()); err != nil {
			return applied{}, err
		}
		a, err := s.applyUpdate(ctx, resp.GetResource(), &want, dry)
		if pe := problem.As(err); pe != nil && (pe.Code == problem.CodeConflict || pe.Kind == problem.NotFound) {
			// Changed or purged since read: apply to the newer state.
			if err := retry.again(err); err != nil {
				return applied{}, err
			}
			continue
		}
		return a, err
	}
}

// applyWant is what a checked apply request sets besides its key: labels
// and annotations are nil, and setOwners false, when the request keeps the
// stored ones.
type applyWant struct {
	spec        []byte
	labels      map[string]string
	annotations map[string]string
	owners      []resource.OwnerReference
	setOwners   bool
}

// checkApply checks the apply request body (its namespace defaulted):
// names, spec and metadata.
func checkApply(body *applyResourceBody) (applyWant, error) {
	var errs []problem.FieldError
	if fe := names.Namespace("/namespace", body.Namespace); fe != nil {
		errs = append(errs, *fe)
	}
	if fe := names.Name("/name", body.Name); fe != nil {
		errs = append(errs, *fe)
	}
	if fe := names.TypeName("/resource_type_name", body.ResourceTypeName); fe != nil {
		errs = append(errs, *fe)
	}
	if fe := names.TypeVersion("/resource_type_version", body.ResourceTypeVersion); fe != nil {
		errs = append(errs, *fe)
	}
	var w applyWant
	w.spec, errs = checkSpec(body.Spec, errs)
	if body.Labels != nil {
		w.labels = orEmpty(*body.Labels)
	}
	if body.Annotations != nil {
		w.annotations = orEmpty(*body.Annotations)
	}
	if body.OwnerReferences != nil {
		w.owners, w.setOwners = *body.OwnerReferences, true
	}
	errs = append(errs, resource.ValidateMetadata(w.labels, w.annotations, w.owners)...)
	if err := fieldsError("invalid resource", errs); err != nil {
		return applyWant{}, err
	}
	return w, nil
}

// applyCreate creates the resource body names as w says, through
// admission.
func (s *Service) applyCreate(ctx context.Context, body *applyResourceBody, w *applyWant, dry bool) (applied, error) {
	in := &resource.Resource{
		Namespace: body.Namespace, Name: body.Name, ResourceTypeName: body.ResourceTypeName, ResourceTypeVersion: body.ResourceTypeVersion,
		Labels: w.labels, Annotations: w.annotations, OwnerReferences: w.owners, Spec: w.spec,
	}
	in.Normalize()
	out, err := s.createAdmitted(ctx, in, dry)
	if err != nil {
		return applied{}, err
	}
	return applied{result: ApplyCreated, doc: resourcepb.FromProto(out), dry: dry}, nil
}

// applyUpdate updates cur, as read, to what w says, through admission,
// on the condition that it has not changed since.
func (s *Service) applyUpdate(ctx context.Context, cur *storev1.Resource, w *applyWant, dry bool) (applied, error) {
	next := resourcepb.FromProto(cur)
	next.Spec = w.spec
	if w.labels != nil {
		next.Labels = w.labels
	}
	if w.annotations != nil {
		next.Annotations = w.annotations
	}
	if w.setOwners {
		next.OwnerReferences = w.owners
	}
	out, err := s.writeUpdate(ctx, update{
		cur: cur, next: next, setLabels: w.labels != nil, setAnnotations: w.annotations != nil, setOwners: w.setOwners,
		expected: cur.GetResourceVersion(), dryRun: dry,
	})
	if err != nil {
		return applied{}, err
	}
	result := ApplyConfigured
	if out.GetResourceVersion() == cur.GetResourceVersion() {
		result = ApplyUnchanged
	}
	return applied{result: result, doc: resourcepb.FromProto(out), dry: dry}, nil
}
