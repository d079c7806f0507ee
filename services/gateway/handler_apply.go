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
	var errs []problem.FieldError
	body.Namespace = names.OrDefault(body.Namespace)
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
	spec, errs := checkSpec(body.Spec, errs)
	var labels, annotations map[string]string
	if body.Labels != nil {
		labels = orEmpty(*body.Labels)
	}
	if body.Annotations != nil {
		annotations = orEmpty(*body.Annotations)
	}
	var owners []resource.OwnerReference
	if body.OwnerReferences != nil {
		owners = *body.OwnerReferences
	}
	errs = append(errs, resource.ValidateMetadata(labels, annotations, owners)...)
	if err := fieldsError("invalid resource", errs); err != nil {
		return applied{}, err
	}
	key := &storev1.ResourceName{ResourceTypeName: body.ResourceTypeName, ResourceTypeVersion: body.ResourceTypeVersion,
		Namespace: body.Namespace, Name: body.Name}
	retry := s.raceRetry(ctx)
	for {
		resp, err := callCtx(s, ctx, s.store.GetResource, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: key}})
		if pe := problem.As(err); pe != nil && pe.Kind == problem.NotFound {
			in := &resource.Resource{
				Namespace: body.Namespace, Name: body.Name, ResourceTypeName: body.ResourceTypeName, ResourceTypeVersion: body.ResourceTypeVersion,
				Labels: labels, Annotations: annotations, OwnerReferences: owners, Spec: spec,
			}
			in.Normalize()
			out, err := s.createAdmitted(ctx, in, dry)
			if pe := problem.As(err); pe != nil && pe.Code == problem.CodeNameTaken {
				// Created meanwhile: update it instead.
				if err := retry.again(err); err != nil {
					return applied{}, err
				}
				continue
			}
			if err != nil {
				return applied{}, err
			}
			return applied{result: ApplyCreated, doc: resourcepb.FromProto(out), dry: dry}, nil
		}
		if err != nil {
			return applied{}, err
		}
		cur := resp.GetResource()
		next := resourcepb.FromProto(cur)
		next.Spec = spec
		if labels != nil {
			next.Labels = labels
		}
		if annotations != nil {
			next.Annotations = annotations
		}
		if body.OwnerReferences != nil {
			next.OwnerReferences = owners
		}
		out, err := s.writeUpdate(ctx, update{
			cur: cur, next: next, setLabels: labels != nil, setAnnotations: annotations != nil, setOwners: body.OwnerReferences != nil,
			expected: cur.GetResourceVersion(), dryRun: dry,
		})
		if pe := problem.As(err); pe != nil && (pe.Code == problem.CodeConflict || pe.Kind == problem.NotFound) {
			// Changed or purged since read: apply to the newer state.
			if err := retry.again(err); err != nil {
				return applied{}, err
			}
			continue
		}
		if err != nil {
			return applied{}, err
		}
		result := ApplyConfigured
		if out.GetResourceVersion() == cur.GetResourceVersion() {
			result = ApplyUnchanged
		}
		return applied{result: result, doc: resourcepb.FromProto(out), dry: dry}, nil
	}
}
