package admission

import (
	"context"
	"errors"

	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	"github.com/no8s/no8s/services/admission/schema"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
)

// handler is the gRPC edge of the admission service.
type handler struct {
	admissionv1.UnimplementedAdmissionServiceServer
	cache *schemaCache
}

func (h *handler) CheckSchema(_ context.Context, req *admissionv1.CheckSchemaRequest) (*admissionv1.CheckSchemaResponse, error) {
	if err := checkSchema(req.GetSchema()); err != nil {
		return nil, problem.ToStatus(err)
	}
	return &admissionv1.CheckSchemaResponse{}, nil
}

func checkSchema(raw []byte) error {
	if len(raw) == 0 {
		return problem.New(problem.Invalid, problem.CodeInvalidSchema, "schema is required").
			WithFields(problem.FieldError{Path: "/schema", Message: "schema is required"})
	}
	if len(raw) > resource.MaxSchemaBytes {
		return problem.New(problem.TooLarge, problem.CodeTooLarge, "schema is %d bytes, more than the %d allowed", len(raw), resource.MaxSchemaBytes).
			WithFields(problem.FieldError{Path: "/schema", Message: "too large"})
	}
	if _, err := schema.Compile(raw); err != nil {
		var ce *schema.CompileError
		if errors.As(err, &ce) {
			return problem.New(problem.Invalid, problem.CodeInvalidSchema, "the schema is not a valid OpenAPI v3 schema").WithFields(ce.Fields...)
		}
		return problem.New(problem.Invalid, problem.CodeInvalidSchema, "the schema is not a valid OpenAPI v3 schema: %v", err).
			WithFields(problem.FieldError{Path: "/schema", Message: err.Error()})
	}
	return nil
}

func (h *handler) AdmitResource(ctx context.Context, req *admissionv1.AdmitResourceRequest) (*admissionv1.AdmitResourceResponse, error) {
	r := req.GetResource()
	if r == nil {
		return nil, problem.ToStatus(problem.Invalidf("resource is required"))
	}
	if req.GetOperation() == admissionv1.Operation_OPERATION_DELETE {
		return &admissionv1.AdmitResourceResponse{Resource: r}, nil
	}
	var errs []problem.FieldError
	if fe := resource.ValidateTypeName("/resource_type_name", r.GetResourceTypeName()); fe != nil {
		errs = append(errs, *fe)
	}
	if fe := resource.ValidateTypeVersion("/resource_type_version", r.GetResourceTypeVersion()); fe != nil {
		errs = append(errs, *fe)
	}
	if len(errs) > 0 {
		return nil, problem.ToStatus(problem.New(problem.Invalid, problem.CodeUnknownType, "resource type %s/%s does not exist",
			r.GetResourceTypeName(), r.GetResourceTypeVersion()).WithFields(errs...))
	}
	c, err := h.cache.get(ctx, r.GetResourceTypeName(), r.GetResourceTypeVersion(), req.GetRefreshSchema())
	if err != nil {
		return nil, problem.ToStatus(err)
	}
	spec, violations, err := c.schema.Admit(r.GetSpec())
	if err != nil {
		return nil, problem.ToStatus(err)
	}
	if len(violations) > 0 {
		return nil, problem.ToStatus(problem.New(problem.Invalid, problem.CodeValidation,
			"spec does not match the schema of %s/%s", r.GetResourceTypeName(), r.GetResourceTypeVersion()).WithFields(violations...))
	}
	if len(spec) > resource.MaxSpecBytes {
		return nil, problem.ToStatus(problem.New(problem.TooLarge, problem.CodeTooLarge, "spec is %d bytes with defaults, more than the %d allowed", len(spec), resource.MaxSpecBytes).
			WithFields(problem.FieldError{Path: "/spec", Message: "too large"}))
	}
	out := cloneResource(r)
	out.Spec = spec
	return &admissionv1.AdmitResourceResponse{Resource: out, SchemaRevision: c.revision}, nil
}
