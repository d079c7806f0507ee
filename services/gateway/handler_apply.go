package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/api/names"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
)

// HeaderApplyResult says what an apply did: created, configured (changed)
// or unchanged.
const HeaderApplyResult = "X-Apply-Result"

// The values of HeaderApplyResult.
const (
	ApplyCreated    = "created"
	ApplyConfigured = "configured"
	ApplyUnchanged  = "unchanged"
)

// applyResourceBody is the body of POST /api/v1/resources/apply: the
// resource as it should be. Labels and annotations, when given, replace the
// stored ones; when omitted, the stored ones are kept.
type applyResourceBody struct {
	Namespace           string             `json:"namespace"`
	Name                string             `json:"name"`
	ResourceTypeName    string             `json:"resource_type_name"`
	ResourceTypeVersion string             `json:"resource_type_version"`
	Spec                json.RawMessage    `json:"spec"`
	Labels              *map[string]string `json:"labels"`
	Annotations         *map[string]string `json:"annotations"`
}

// applyResource is server-side apply: it creates the resource named by
// (type, version, namespace, name) or updates it to the given spec, labels
// and annotations, through admission like every write. Applying what is
// stored changes nothing (same generation, same resource_version, no
// event). A conflicting concurrent write (409 conflict, or name_taken when
// two applies create at once) is retried against the newer state.
func (s *Service) applyResource(c *echo.Context) error {
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	var body applyResourceBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
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
	errs = append(errs, resource.ValidateMetadata(labels, annotations, nil)...)
	if err := fieldsError("invalid resource", errs); err != nil {
		return err
	}
	key := &storev1.ResourceName{ResourceTypeName: body.ResourceTypeName, ResourceTypeVersion: body.ResourceTypeVersion,
		Namespace: body.Namespace, Name: body.Name}
	for attempt := 1; ; attempt++ {
		resp, err := call(s, c, s.store.GetResource, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: key}})
		if pe := problem.As(err); pe != nil && pe.Kind == problem.NotFound {
			in := &resource.Resource{
				Namespace: body.Namespace, Name: body.Name, ResourceTypeName: body.ResourceTypeName, ResourceTypeVersion: body.ResourceTypeVersion,
				Labels: labels, Annotations: annotations, Spec: spec,
			}
			in.Normalize()
			out, err := s.createAdmitted(c, in, dry)
			if pe := problem.As(err); pe != nil && pe.Code == problem.CodeNameTaken && attempt < MaxPatchAttempts {
				continue // created meanwhile: update it instead
			}
			if err != nil {
				return err
			}
			doc := resourcepb.FromProto(out)
			if !dry && doc != nil && doc.ID != 0 {
				c.Response().Header().Set(echo.HeaderLocation, "/api/v1/resources/"+strconv.FormatInt(doc.ID, 10))
			}
			c.Response().Header().Set(HeaderApplyResult, ApplyCreated)
			return writeJSON(c, http.StatusCreated, doc)
		}
		if err != nil {
			return err
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
		out, err := s.writeUpdate(c, update{
			cur: cur, next: next, setLabels: labels != nil, setAnnotations: annotations != nil,
			expected: cur.GetResourceVersion(), dryRun: dry,
		})
		if pe := problem.As(err); pe != nil && (pe.Code == problem.CodeConflict || pe.Kind == problem.NotFound) && attempt < MaxPatchAttempts {
			continue // changed or purged since read: apply to the newer state
		}
		if err != nil {
			return err
		}
		result := ApplyConfigured
		if out.GetResourceVersion() == cur.GetResourceVersion() {
			result = ApplyUnchanged
		}
		c.Response().Header().Set(HeaderApplyResult, result)
		return writeJSON(c, http.StatusOK, resourcepb.FromProto(out))
	}
}
