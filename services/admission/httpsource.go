package admission

// Admission of the built-in type HttpSource (issue 18, scope 2): besides
// its schema, the checks of httpsource.Check (URL shape, header names,
// exactly one name and one spec mapping, pointers, templates that parse),
// the outbound address rule on the URL (as on a webhook's), the target type
// existing, the templates rendered with a sample item within the render
// budget (httpsource.Spec.CheckSample), and the target fixed once created
// (the resources of the old type would be orphaned).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/httpsource"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// checkHTTPSource runs the checks of HttpSource on an admitted (defaulted)
// resource of operation op; other types pass.
func (h *handler) checkHTTPSource(ctx context.Context, op string, r *storev1.Resource) error {
	if r.GetResourceTypeName() != httpsource.Type || r.GetResourceTypeVersion() != httpsource.Version {
		return nil
	}
	errs, err := h.httpSourceErrors(ctx, op, r)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		detail := errs[0].Path + ": " + errs[0].Message
		if len(errs) > 1 {
			detail = fmt.Sprintf("%d problems, the first: %s", len(errs), detail)
		}
		return problem.New(problem.Invalid, problem.CodeValidation, "%s %q is refused: %s", httpsource.Type, r.GetName(), detail).
			WithFields(errs...)
	}
	return nil
}

func (h *handler) httpSourceErrors(ctx context.Context, op string, r *storev1.Resource) ([]problem.FieldError, error) {
	var spec httpsource.Spec
	if err := json.Unmarshal(r.GetSpec(), &spec); err != nil {
		return []problem.FieldError{{Path: "/spec", Message: err.Error()}}, nil
	}
	// Every problem is reported, as the schema validator reports every
	// field; a check runs when what it reads passed the checks before it
	// (the address rule and the grants read a URL that parses, the sample
	// render templates that parse).
	static := httpsource.Check(spec)
	errs := slices.Clone(static)
	failed := func(path string) bool {
		return slices.ContainsFunc(static, func(fe problem.FieldError) bool { return fe.Path == path })
	}
	if !failed("/spec/url") {
		if err := h.outbound.CheckURL(spec.URL); err != nil {
			errs = append(errs, problem.FieldError{Path: "/spec/url", Message: err.Error()})
		} else if origin, err := grants.Origin(spec.URL); err != nil {
			errs = append(errs, problem.FieldError{Path: "/spec/url", Message: err.Error()})
		} else {
			for _, k := range slices.Sorted(maps.Keys(spec.Headers)) {
				if failed("/spec/headers/" + resource.EscapePointer(k)) {
					continue
				}
				if err := h.grants.AllowFor(grants.UseHTTPHeader, r.GetNamespace(), spec.Headers[k], origin, authn.FromContext(ctx)); err != nil {
					errs = append(errs, problem.FieldError{Path: "/spec/headers/" + resource.EscapePointer(k), Message: err.Error()})
				}
			}
		}
	}
	if len(static) == 0 {
		rd := tenancy.NewRenderer()
		renderCtx, cancel := rd.Bound(ctx)
		defer cancel()
		if fe := spec.CheckSample(renderCtx, rd); fe != nil {
			errs = append(errs, *fe)
		}
	}
	if _, err := h.cache.get(ctx, spec.Target.TypeName, spec.Target.TypeVersion, true); err != nil {
		pe := problem.As(err)
		if pe == nil || pe.Code != problem.CodeUnknownType {
			return nil, err
		}
		errs = append(errs, problem.FieldError{Path: "/spec/target", Message: fmt.Sprintf("resource type %s does not exist", spec.Target)})
	}
	if len(errs) > 0 || op != webhookconf.OpUpdate {
		return errs, nil
	}
	old, err := h.cache.store.GetResource(ctx, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: &storev1.ResourceName{
		ResourceTypeName: httpsource.Type, ResourceTypeVersion: httpsource.Version, Namespace: r.GetNamespace(), Name: r.GetName(),
	}}})
	if pe := problem.As(grpcstatus.FromStatus(err)); pe != nil && pe.Kind == problem.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, grpcstatus.FromStatus(err)
	}
	var was httpsource.Spec
	if json.Unmarshal(old.GetResource().GetSpec(), &was) == nil && was.Target != spec.Target {
		return []problem.FieldError{{Path: "/spec/target", Message: fmt.Sprintf("the target cannot change (it is %s): delete the source and create it anew", was.Target)}}, nil
	}
	return nil, nil
}
