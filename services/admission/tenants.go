package admission

// Admission of the built-in tenant types (seed 002, issue 14 scope 3): kro
// checks its resource graphs statically before anything runs, and so do we.
// A TenantTemplate is refused unless its registry exists, its resource ids
// are unique, its dependIds name existing ids without a cycle (the error
// names the cycle), its templates parse, and every resource rendered with a
// sample row validates against its target type's schema (errors name the
// resource id and the field path). A TenantRegistry's datasource host must
// pass the outbound address rule that webhooks follow, and its query must be
// one read-only SELECT (tenancy.CheckQuery).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/platform/secret"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// checkTenantTypes runs the checks of the built-in tenant types on an
// admitted (defaulted) resource; other types pass.
func (h *handler) checkTenantTypes(ctx context.Context, r *storev1.Resource) error {
	if r.GetResourceTypeVersion() != tenancy.Version {
		return nil
	}
	var errs []problem.FieldError
	var err error
	switch r.GetResourceTypeName() {
	case tenancy.RegistryType:
		errs = h.checkRegistry(ctx, r)
	case tenancy.TemplateType:
		errs, err = h.checkTemplate(ctx, r)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		detail := errs[0].Message
		if len(errs) > 1 {
			detail = fmt.Sprintf("%d problems, the first: %s", len(errs), detail)
		}
		return problem.New(problem.Invalid, problem.CodeValidation, "%s %q is refused: %s", r.GetResourceTypeName(), r.GetName(), detail).
			WithFields(errs...)
	}
	return nil
}

func (h *handler) checkRegistry(ctx context.Context, r *storev1.Resource) []problem.FieldError {
	var spec tenancy.RegistrySpec
	if err := json.Unmarshal(r.GetSpec(), &spec); err != nil {
		return []problem.FieldError{{Path: "/spec", Message: err.Error()}}
	}
	var errs []problem.FieldError
	if err := h.outbound.CheckURL("tcp://" + spec.Source.Host); err != nil {
		errs = append(errs, problem.FieldError{Path: "/spec/source/host", Message: err.Error()})
	}
	if spec.Source.Query != "" {
		if err := tenancy.CheckQuery(spec.Source.Type, spec.Source.Query); err != nil {
			errs = append(errs, problem.FieldError{Path: "/spec/source/query", Message: err.Error()})
		}
	}
	dest := grants.Datasource(spec.Source.Host, spec.Source.DefaultPort())
	for field, ref := range map[string]secret.Ref{"usernameRef": spec.Source.UsernameRef, "passwordRef": spec.Source.PasswordRef} {
		if ref.IsZero() {
			continue
		}
		if err := h.grants.AllowFor(grants.UseDatasource, r.GetNamespace(), ref, dest, authn.FromContext(ctx)); err != nil {
			errs = append(errs, problem.FieldError{Path: "/spec/source/" + field, Message: err.Error()})
		}
	}
	slices.SortFunc(errs, func(a, b problem.FieldError) int { return strings.Compare(a.Path, b.Path) })
	return errs
}

func (h *handler) checkTemplate(ctx context.Context, r *storev1.Resource) ([]problem.FieldError, error) {
	var spec tenancy.TemplateSpec
	if err := json.Unmarshal(r.GetSpec(), &spec); err != nil {
		return []problem.FieldError{{Path: "/spec", Message: err.Error()}}, nil
	}
	reg, err := h.cache.store.GetResource(ctx, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: &storev1.ResourceName{
		ResourceTypeName: tenancy.RegistryType, ResourceTypeVersion: tenancy.Version, Namespace: r.GetNamespace(), Name: spec.RegistryID,
	}}})
	var extra map[string]string
	pe := problem.As(grpcstatus.FromStatus(err))
	switch {
	case pe != nil && pe.Kind == problem.NotFound:
		return []problem.FieldError{{Path: "/spec/registryId", Message: fmt.Sprintf("no TenantRegistry %q in namespace %q (a template references the registry of its own namespace)", spec.RegistryID, r.GetNamespace())}}, nil
	case err != nil:
		return nil, grpcstatus.FromStatus(err)
	default:
		var rs tenancy.RegistrySpec
		if err := json.Unmarshal(reg.GetResource().GetSpec(), &rs); err == nil {
			extra = rs.ExtraValueMappings
		}
	}
	// Every problem is reported, as the schema validator reports every
	// field: the static checks', then each resource's render with a sample
	// row (every field that fails, a field the static checks named once).
	errs := tenancy.CheckTemplate(spec)
	reported := map[string]bool{}
	for _, fe := range errs {
		reported[fe.Path] = true
	}
	sample := tenancy.SampleValues(spec.RegistryID, r.GetName(), extra)
	// Every render within its budget, and all of them within one render's
	// time: a template bomb is refused in about a second, naming the
	// budget.
	rd := tenancy.NewRenderer()
	renderCtx, cancel := rd.Bound(ctx)
	defer cancel()
	for i, tr := range spec.Resources {
		base := fmt.Sprintf("/spec/resources/%d", i)
		rendered, err := rd.Render(renderCtx, tr, sample)
		if err != nil {
			failed := tenancy.RenderErrorList(err)
			if failed == nil {
				return nil, err
			}
			for _, re := range failed {
				if errors.Is(re, tenancy.ErrFromJSON) || reported[base+re.Path] {
					// The sample values are not JSON: a field that parses
					// a row's value with fromJson can only be rendered
					// with a real row, by the tenant reconciler (a bad row
					// makes its Tenant Degraded, naming the error).
					continue
				}
				errs = append(errs, problem.FieldError{Path: base + re.Path, Message: fmt.Sprintf("resource %q: rendered with a sample row: %v", tr.ID, re.Err)})
			}
			continue
		}
		c, err := h.cache.get(ctx, tr.TypeName, tr.TypeVersion, true)
		if err != nil {
			if pe := problem.As(err); pe != nil && pe.Code == problem.CodeUnknownType {
				errs = append(errs, problem.FieldError{Path: base + "/typeName", Message: fmt.Sprintf("resource %q: resource type %s/%s does not exist", tr.ID, tr.TypeName, tr.TypeVersion)})
				continue
			}
			return nil, err
		}
		_, violations, err := c.schema.Admit(rendered.Spec)
		if err != nil {
			return nil, err
		}
		for _, v := range violations {
			errs = append(errs, problem.FieldError{Path: base + v.Path,
				Message: fmt.Sprintf("resource %q (%s/%s) rendered with a sample row: %s: %s", tr.ID, tr.TypeName, tr.TypeVersion, strings.TrimPrefix(v.Path, "/spec"), v.Message)})
		}
	}
	return errs, nil
}
