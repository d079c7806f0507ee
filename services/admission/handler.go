package admission

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/platform/outbound"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission/schema"
	"github.com/no8s/no8s/services/admission/webhook"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/internal/strictjson"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// handler is the gRPC edge of the admission service.
type handler struct {
	admissionv1.UnimplementedAdmissionServiceServer
	cache    *schemaCache
	webhooks *webhook.Registry
	chain    *webhook.Chain
	// live is the live-reconciler rule (nil: off).
	live *liveTypes
	// outbound is the address rule, which datasource hosts follow too.
	outbound outbound.Policy
	// grants are the credential grants (nil: nothing granted).
	grants *grants.Set
}

func (h *handler) CheckSchema(_ context.Context, req *admissionv1.CheckSchemaRequest) (*admissionv1.CheckSchemaResponse, error) {
	if err := checkSchema(req.GetSchema()); err != nil {
		return nil, grpcstatus.ToStatus(err)
	}
	return &admissionv1.CheckSchemaResponse{}, nil
}

func checkSchema(raw []byte) error {
	if len(raw) == 0 {
		return problem.New(problem.Invalid, problem.CodeInvalidSchema, "schema is required").
			WithFields(problem.FieldError{Path: "/schema", Message: "schema is required"})
	}
	if len(raw) > names.MaxSchemaBytes {
		return problem.New(problem.TooLarge, problem.CodeTooLarge, "schema is %d bytes, more than the %d allowed", len(raw), names.MaxSchemaBytes).
			WithFields(problem.FieldError{Path: "/schema", Message: "too large"})
	}
	if perr := strictjson.Check(raw, "/schema"); perr != nil {
		return problem.New(problem.Invalid, problem.CodeInvalidSchema, "the schema is not acceptable JSON: %s", perr.Detail).WithFields(perr.Fields...)
	}
	// Compile the schema as the store will hand it back (numbers without
	// exponents), so that a schema accepted here compiles when it is read.
	if _, err := schema.Compile(strictjson.Expanded(raw)); err != nil {
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
	out, rev, err := h.admit(ctx, req)
	if err != nil {
		return nil, grpcstatus.ToStatus(err)
	}
	return &admissionv1.AdmitResourceResponse{Resource: out, SchemaRevision: rev}, nil
}

func (h *handler) admit(ctx context.Context, req *admissionv1.AdmitResourceRequest) (*storev1.Resource, int64, error) {
	r := req.GetResource()
	if r == nil {
		return nil, 0, problem.Invalidf("resource is required")
	}
	// The grants bound to subjects are decided on the requester (none for
	// a service identity's write).
	ctx = authn.WithPrincipal(ctx, requesterOf(req))
	var op string
	switch req.GetOperation() {
	case admissionv1.Operation_OPERATION_CREATE:
		op = webhookconf.OpCreate
	case admissionv1.Operation_OPERATION_UPDATE:
		op = webhookconf.OpUpdate
	case admissionv1.Operation_OPERATION_DELETE:
		return r, 0, h.admitDelete(ctx, req)
	default:
		return nil, 0, problem.Invalidf("operation is required: CREATE, UPDATE or DELETE")
	}
	if err := checkAdmitNames(r); err != nil {
		return nil, 0, err
	}
	c, err := h.cache.get(ctx, r.GetResourceTypeName(), r.GetResourceTypeVersion(), req.GetRefreshSchema())
	if err != nil {
		return nil, 0, err
	}
	spec, err := admitSpec(c, r)
	if err != nil {
		return nil, 0, err
	}
	out := cloneResource(r)
	out.Spec = spec
	// Webhooks and the store see the namespace a create names, or the
	// default one.
	out.Namespace = names.OrDefault(r.GetNamespace())
	if err := h.checkTenantTypes(ctx, out); err != nil {
		return nil, 0, err
	}
	if err := h.checkHTTPSource(ctx, op, out); err != nil {
		return nil, 0, err
	}
	if err := checkRole(out); err != nil {
		return nil, 0, err
	}
	if op == webhookconf.OpCreate && h.live != nil && !isRoleType(out) {
		if err := h.addReconcilerFinalizers(ctx, out); err != nil {
			return nil, 0, err
		}
	}
	hooks, err := h.webhooks.Match(ctx, op, r.GetResourceTypeName(), r.GetResourceTypeVersion(), out.Namespace)
	if err != nil || hooks.Empty() {
		return out, c.revision, err
	}
	a := webhook.Admission{Operation: op, DryRun: req.GetDryRun(), User: webhookUser(req), Resource: resourcepb.FromProto(out)}
	if op == webhookconf.OpUpdate {
		a.Old = resourcepb.FromProto(req.GetOldResource())
	}
	admitted, err := h.chain.Run(ctx, hooks, a, c.schema.Admit)
	if err != nil {
		return nil, 0, err
	}
	out.Spec, out.Labels, out.Annotations = admitted.Spec, admitted.Labels, admitted.Annotations
	return out, c.revision, nil
}

// checkAdmitNames checks the namespace (when given) and the type that r
// names.
func checkAdmitNames(r *storev1.Resource) error {
	if ns := r.GetNamespace(); ns != "" {
		if fe := names.Namespace("/namespace", ns); fe != nil {
			return problem.New(problem.Invalid, problem.CodeInvalid, "invalid resource").WithFields(*fe)
		}
	}
	var errs []problem.FieldError
	if fe := names.TypeName("/resource_type_name", r.GetResourceTypeName()); fe != nil {
		errs = append(errs, *fe)
	}
	if fe := names.TypeVersion("/resource_type_version", r.GetResourceTypeVersion()); fe != nil {
		errs = append(errs, *fe)
	}
	if len(errs) > 0 {
		return problem.New(problem.Invalid, problem.CodeUnknownType, "resource type %s/%s does not exist",
			r.GetResourceTypeName(), r.GetResourceTypeVersion()).WithFields(errs...)
	}
	return nil
}

// admitSpec is r's spec checked against the type's schema c, with its
// defaults, within names.MaxSpecBytes.
func admitSpec(c *compiled, r *storev1.Resource) ([]byte, error) {
	spec, violations, err := c.schema.Admit(r.GetSpec())
	if err != nil {
		return nil, err
	}
	if len(violations) > 0 {
		return nil, problem.New(problem.Invalid, problem.CodeValidation,
			"spec does not match the schema of %s/%s", r.GetResourceTypeName(), r.GetResourceTypeVersion()).WithFields(violations...)
	}
	if len(spec) > names.MaxSpecBytes {
		return nil, problem.New(problem.TooLarge, problem.CodeTooLarge, "spec is %d bytes with defaults, more than the %d allowed", len(spec), names.MaxSpecBytes).
			WithFields(problem.FieldError{Path: "/spec", Message: "too large"})
	}
	return spec, nil
}

// addReconcilerFinalizers adds to out, a resource being created, the
// finalizers its type's reconciler requires (and refuses the create while
// no reconciler serves the type, as requireReconciler says).
func (h *handler) addReconcilerFinalizers(ctx context.Context, out *storev1.Resource) error {
	fins, err := h.live.requireReconciler(ctx, out.GetResourceTypeName(), out.GetResourceTypeVersion())
	if err != nil {
		return err
	}
	for _, fin := range fins {
		if slices.Contains(out.Finalizers, fin) {
			continue
		}
		if len(out.Finalizers) >= names.MaxFinalizers {
			return problem.New(problem.Invalid, problem.CodeInvalid, "at most %d finalizers, including the reconciler's %s", names.MaxFinalizers, strings.Join(fins, ", ")).
				WithFields(problem.FieldError{Path: "/finalizers", Message: "too many finalizers"})
		}
		out.Finalizers = append(out.Finalizers, fin)
	}
	return nil
}

// admitDelete runs the validating webhooks that intercept DELETE on the
// resource's current state.
func (h *handler) admitDelete(ctx context.Context, req *admissionv1.AdmitResourceRequest) error {
	r := req.GetResource()
	hooks, err := h.webhooks.Match(ctx, webhookconf.OpDelete, r.GetResourceTypeName(), r.GetResourceTypeVersion(), names.OrDefault(r.GetNamespace()))
	if err != nil || hooks.Empty() {
		return err
	}
	hooks.Mutating = nil
	_, err = h.chain.Run(ctx, hooks, webhook.Admission{Operation: webhookconf.OpDelete, DryRun: req.GetDryRun(), User: webhookUser(req), Resource: resourcepb.FromProto(r)}, nil)
	return err
}

// requesterOf is the principal of the write req asks for, nil when the
// gateway named none or a service identity asks (no grant is bound to
// one).
func requesterOf(req *admissionv1.AdmitResourceRequest) *authn.Principal {
	r := req.GetRequester()
	if r == nil || r.GetUsername() == "" || r.GetService() {
		return nil
	}
	return &authn.Principal{Username: r.GetUsername(), Groups: r.GetGroups(), TokenID: r.GetTokenId()}
}

// webhookUser is who webhooks are told asks for the write req asks for:
// the requester, a service identity's system user included; nil when the
// gateway named none.
func webhookUser(req *admissionv1.AdmitResourceRequest) *webhook.User {
	r := req.GetRequester()
	if r == nil || r.GetUsername() == "" {
		return nil
	}
	groups := r.GetGroups()
	if groups == nil {
		groups = []string{}
	}
	return &webhook.User{Username: r.GetUsername(), Groups: groups}
}
