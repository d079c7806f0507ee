package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/labstack/echo/v5"
	"google.golang.org/protobuf/proto"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// Resource list limits (the store's).
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// createResourceBody is the body of POST /api/v1/resources: the API's
// (libs/client); an absent namespace means "default".
type createResourceBody = client.CreateRequest

// updateResourceBody is the body of PUT /api/v1/resources/{id}: the spec is
// replaced; labels and annotations only when given.
type updateResourceBody struct {
	// Namespace may be repeated but not changed.
	Namespace   *string            `json:"namespace"`
	Spec        json.RawMessage    `json:"spec"`
	Labels      *map[string]string `json:"labels"`
	Annotations *map[string]string `json:"annotations"`
	// OwnerReferences replace the current ones when given ([] drops them
	// all).
	OwnerReferences *[]resource.OwnerReference `json:"owner_references"`
	ResourceVersion int64                      `json:"resource_version"`
}

// finalizersBody is the body of PUT /api/v1/resources/{id}/finalizers.
type finalizersBody struct {
	Add             []string `json:"add"`
	Remove          []string `json:"remove"`
	ResourceVersion int64    `json:"resource_version"`
}

// patchDocument is what a merge patch applies to.
type patchDocument struct {
	Spec            json.RawMessage           `json:"spec"`
	Labels          map[string]string         `json:"labels"`
	Annotations     map[string]string         `json:"annotations"`
	OwnerReferences []resource.OwnerReference `json:"owner_references"`
}

// isPatchField reports whether a merge patch may carry a top-level field.
func isPatchField(k string) bool {
	switch k {
	case "spec", "labels", "annotations", "owner_references", "resource_version", "namespace":
		return true
	}
	return false
}

func checkSpec(raw json.RawMessage, errs []problem.FieldError) ([]byte, []problem.FieldError) {
	if isNull(raw) {
		return nil, append(errs, problem.FieldError{Path: "/spec", Message: "spec is required"})
	}
	spec, perr := resource.CompactObject("/spec", raw)
	if perr != nil {
		return nil, append(errs, perr.Fields...)
	}
	return spec, errs
}

func checkResourceVersion(rv int64, errs []problem.FieldError) []problem.FieldError {
	if rv < 0 {
		errs = append(errs, problem.FieldError{Path: "/resource_version", Message: "must be a positive integer"})
	}
	return errs
}

func (s *Service) createResource(c *echo.Context) error {
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	var body createResourceBody
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
	if body.ResourceTypeName == "" {
		errs = append(errs, problem.FieldError{Path: "/resource_type_name", Message: "resource_type_name is required"})
	} else if fe := names.TypeName("/resource_type_name", body.ResourceTypeName); fe != nil {
		errs = append(errs, *fe)
	}
	if body.ResourceTypeVersion == "" {
		errs = append(errs, problem.FieldError{Path: "/resource_type_version", Message: "resource_type_version is required"})
	} else if fe := names.TypeVersion("/resource_type_version", body.ResourceTypeVersion); fe != nil {
		errs = append(errs, *fe)
	}
	spec, errs := checkSpec(body.Spec, errs)
	errs = append(errs, resource.ValidateMetadata(body.Labels, body.Annotations, body.OwnerReferences)...)
	for i, f := range body.Finalizers {
		if fe := names.Finalizer(fmt.Sprintf("/finalizers/%d", i), f); fe != nil {
			errs = append(errs, *fe)
		}
	}
	if len(body.Finalizers) > names.MaxFinalizers {
		errs = append(errs, problem.FieldError{Path: "/finalizers", Message: fmt.Sprintf("at most %d finalizers", names.MaxFinalizers)})
	}
	if err := fieldsError("invalid resource", errs); err != nil {
		return err
	}
	in := &resource.Resource{
		Namespace:           body.Namespace,
		Name:                body.Name,
		ResourceTypeName:    body.ResourceTypeName,
		ResourceTypeVersion: body.ResourceTypeVersion,
		Labels:              body.Labels,
		Annotations:         body.Annotations,
		OwnerReferences:     body.OwnerReferences,
		Spec:                spec,
		Finalizers:          body.Finalizers,
	}
	in.Normalize()
	out, err := s.createAdmitted(c.Request().Context(), in, dry)
	if err != nil {
		return err
	}
	doc := resourcepb.FromProto(out)
	if !dry && doc != nil && doc.ID != 0 {
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/resources/"+strconv.FormatInt(doc.ID, 10))
	}
	return writeJSON(c, http.StatusCreated, doc)
}

// createAdmitted admits a new resource and stores it.
func (s *Service) createAdmitted(ctx context.Context, in *resource.Resource, dry bool) (*storev1.Resource, error) {
	areq := &admissionv1.AdmitResourceRequest{Operation: admissionv1.Operation_OPERATION_CREATE, Resource: resourcepb.ToProto(in), DryRun: dry}
	var out *storev1.Resource
	err := s.admitAndWrite(ctx, areq, func(admitted *storev1.Resource, rev int64) error {
		resp, err := callCtx(s, ctx, s.store.CreateResource, &storev1.CreateResourceRequest{Resource: admitted, SchemaRevision: rev, DryRun: dry})
		out = resp.GetResource()
		return err
	})
	return out, err
}

// admitAndWrite admits req and hands the admitted resource and its schema
// revision to write. When the store answers schema_changed, it admits again
// against a freshly read schema, up to maxSchemaRetries times.
func (s *Service) admitAndWrite(ctx context.Context, req *admissionv1.AdmitResourceRequest, write func(admitted *storev1.Resource, schemaRevision int64) error) error {
	// Every create and update (HTTP, apply, the queue input) is decided
	// here, and a role or binding once more as admitted (authorizeGrant).
	if err := s.authorizeWrite(ctx, req.GetOldResource(), req.GetResource()); err != nil {
		return err
	}
	req.Requester = requester(ctx)
	if r := req.GetResource(); r.GetResourceTypeName() == tenancy.TenantType && r.GetResourceTypeVersion() == tenancy.Version &&
		fenceLease(ctx) != tenancy.SyncLease {
		return problem.New(problem.Forbidden, problem.CodeDenied,
			"Tenants are written by registry-sync only (its fenced writes carry %s: %s); change the registry's rows or its templates instead",
			fence.HeaderLease, tenancy.SyncLease)
	}
	// Every create and update (HTTP, apply, the queue input) passes here:
	// the reserved keys are their writers' (authz.Reserved).
	if err := s.rest.Keys(ctx, reservedKeys(req.GetOldResource()), reservedKeys(req.GetResource())); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		ar, err := callCtx(s, ctx, s.admission.AdmitResource, req)
		if err != nil {
			return err
		}
		admitted := ar.GetResource()
		if admitted == nil {
			return fmt.Errorf("admission answered without a resource")
		}
		if err := s.authorizeGrant(ctx, admitted); err != nil {
			return err
		}
		err = write(admitted, ar.GetSchemaRevision())
		if pe := problem.As(err); pe != nil && pe.Code == problem.CodeSchemaChanged && attempt < maxSchemaRetries {
			req.RefreshSchema = true
			continue
		}
		return err
	}
}

// reservedKeys are the keys of r the REST rules look at (none for nil).
func reservedKeys(r *storev1.Resource) authz.Keys {
	return authz.Keys{Finalizers: r.GetFinalizers(), Labels: r.GetLabels(), Annotations: r.GetAnnotations()}
}

func (s *Service) getResourceByID(ctx context.Context, id int64) (*storev1.Resource, error) {
	resp, err := callCtx(s, ctx, s.store.GetResource, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Id{Id: id}})
	if err != nil {
		return nil, err
	}
	return resp.GetResource(), nil
}

func (s *Service) getResource(c *echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.getResourceByID(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resourcepb.FromProto(r))
}

// queryNamespace reads ?namespace=: a namespace's name, or def when absent
// or empty.
func queryNamespace(c *echo.Context, def string) (string, error) {
	ns := c.QueryParam("namespace")
	if ns == "" {
		return def, nil
	}
	if fe := names.Namespace("/namespace", ns); fe != nil {
		return "", problem.New(problem.Invalid, problem.CodeInvalid, "namespace=%q: %s", ns, fe.Message).WithFields(*fe)
	}
	return ns, nil
}

// checkNamespaceKept refuses a write that names another namespace than the
// resource's: the namespace is immutable.
func checkNamespaceKept(cur *storev1.Resource, given *string) error {
	if given == nil || *given == names.OrDefault(cur.GetNamespace()) {
		return nil
	}
	return problem.New(problem.Invalid, problem.CodeInvalid, "the namespace of a resource cannot change").WithFields(problem.FieldError{
		Path: "/namespace", Message: fmt.Sprintf("namespace is immutable: it is %q; create the resource in the other namespace instead", names.OrDefault(cur.GetNamespace())),
	})
}

func (s *Service) getResourceByName(c *echo.Context) error {
	ns, err := queryNamespace(c, names.DefaultNamespace)
	if err != nil {
		return err
	}
	if err := s.authorize(c.Request().Context(), newObjectRequest(rbac.VerbGet, c.Param("type"), ns, c.Param("name"))); err != nil {
		return err
	}
	resp, err := call(s, c, s.store.GetResource, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: &storev1.ResourceName{
		ResourceTypeName: c.Param("type"), ResourceTypeVersion: c.Param("version"), Namespace: ns, Name: c.Param("name"),
	}}})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resourcepb.FromProto(resp.GetResource()))
}

func (s *Service) listResources(c *echo.Context) error {
	limit, given, err := queryInt(c, "limit", 1, maxListLimit)
	if err != nil {
		return err
	}
	if !given {
		limit = defaultListLimit
	}
	ns, err := queryNamespace(c, "")
	if err != nil {
		return err
	}
	allow, err := s.listFilter(c.Request().Context(), rbac.VerbList, c.QueryParam("resource_type"), ns)
	if err != nil {
		return err
	}
	resp, err := call(s, c, s.store.ListResources, &storev1.ListResourcesRequest{
		ResourceTypeName:    c.QueryParam("resource_type"),
		ResourceTypeVersion: c.QueryParam("resource_type_version"),
		Namespace:           ns,
		Status:              c.QueryParam("status"),
		LabelSelector:       c.QueryParam("label_selector"),
		Limit:               int32(limit),
		ContinueToken:       c.QueryParam("continue"),
		Documents:           true,
	})
	if err != nil {
		return err
	}
	h := c.Response().Header()
	if tok := resp.GetContinueToken(); tok != "" {
		h.Set(HeaderContinueToken, tok)
	}
	h.Set(HeaderResourceVersion, strconv.FormatInt(resp.GetResourceVersion(), 10))
	// The store sends each resource's canonical document: serve them as
	// they are, as one JSON array.
	docs := resp.GetDocuments()
	if allow != nil {
		docs = visibleDocuments(docs, allow)
	}
	size := 2
	for _, d := range docs {
		size += len(d) + 1
	}
	body := make([]byte, 0, size)
	body = append(body, '[')
	for i, d := range docs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, d...)
	}
	body = append(body, ']')
	return c.JSONBlob(http.StatusOK, body)
}

// staleError is the answer to a precondition that no longer holds.
func staleError(id, have, want int64) error {
	return problem.New(problem.Conflict, problem.CodeConflict,
		"resource %d has resource_version %d, not %d: it changed since you read it; read it again and retry", id, have, want)
}

// update describes one admitted update of a resource.
type update struct {
	cur                       *storev1.Resource
	next                      *resource.Resource
	setLabels, setAnnotations bool
	// setOwners replaces the owner references with next's.
	setOwners bool
	expected  int64
	dryRun    bool
}

// writeUpdate admits u.next against u.cur and stores it.
func (s *Service) writeUpdate(ctx context.Context, u update) (*storev1.Resource, error) {
	areq := &admissionv1.AdmitResourceRequest{
		Operation:   admissionv1.Operation_OPERATION_UPDATE,
		Resource:    resourcepb.ToProto(u.next),
		OldResource: u.cur,
		DryRun:      u.dryRun,
	}
	var out *storev1.Resource
	err := s.admitAndWrite(ctx, areq, func(admitted *storev1.Resource, rev int64) error {
		req := &storev1.UpdateResourceRequest{
			Id:                      u.cur.GetId(),
			Spec:                    admitted.GetSpec(),
			Labels:                  stringMap(admitted.GetLabels(), u.cur.GetLabels(), u.setLabels),
			Annotations:             stringMap(admitted.GetAnnotations(), u.cur.GetAnnotations(), u.setAnnotations),
			OwnerReferences:         ownerList(admitted.GetOwnerReferences(), u.cur.GetOwnerReferences(), u.setOwners),
			ExpectedResourceVersion: u.expected,
			SchemaRevision:          rev,
			DryRun:                  u.dryRun,
		}
		if req.Spec == nil {
			req.Spec = []byte("{}")
		}
		resp, err := callCtx(s, ctx, s.store.UpdateResource, req)
		out = resp.GetResource()
		return err
	})
	return out, err
}

// stringMap is the labels or annotations to send: the admitted ones when
// the request sets them or admission (a mutating webhook) changed them, else
// nil (unchanged).
func stringMap(admitted, cur map[string]string, set bool) *storev1.StringMap {
	if set || !maps.Equal(admitted, cur) {
		if admitted == nil {
			admitted = map[string]string{}
		}
		return &storev1.StringMap{Entries: admitted}
	}
	return nil
}

// ownerList is the owner references to send: the admitted ones when the
// request sets them or admission changed them, else nil (unchanged).
func ownerList(admitted, cur []*storev1.OwnerReference, set bool) *storev1.OwnerReferenceList {
	if set || !slices.EqualFunc(admitted, cur, func(a, b *storev1.OwnerReference) bool { return proto.Equal(a, b) }) {
		return &storev1.OwnerReferenceList{Items: admitted}
	}
	return nil
}

func (s *Service) updateResource(c *echo.Context) error {
	id, dry, err := writeTarget(c)
	if err != nil {
		return err
	}
	var body updateResourceBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	spec, errs := checkSpec(body.Spec, nil)
	errs = checkResourceVersion(body.ResourceVersion, errs)
	var labels, annotations map[string]string
	if body.Labels != nil {
		labels = *body.Labels
	}
	if body.Annotations != nil {
		annotations = *body.Annotations
	}
	var owners []resource.OwnerReference
	if body.OwnerReferences != nil {
		owners = *body.OwnerReferences
	}
	errs = append(errs, resource.ValidateMetadata(labels, annotations, owners)...)
	if err := fieldsError("invalid resource", errs); err != nil {
		return err
	}
	cur, err := s.storedResource(c.Request().Context(), rbac.VerbUpdate, id)
	if err != nil {
		return err
	}
	if err := checkNamespaceKept(cur, body.Namespace); err != nil {
		return err
	}
	if body.ResourceVersion != 0 && body.ResourceVersion != cur.GetResourceVersion() {
		return staleError(id, cur.GetResourceVersion(), body.ResourceVersion)
	}
	next := resourcepb.FromProto(cur)
	next.Spec = spec
	if body.Labels != nil {
		next.Labels = orEmpty(labels)
	}
	if body.Annotations != nil {
		next.Annotations = orEmpty(annotations)
	}
	if body.OwnerReferences != nil {
		next.OwnerReferences = owners
	}
	out, err := s.writeUpdate(c.Request().Context(), update{
		cur: cur, next: next, setLabels: body.Labels != nil, setAnnotations: body.Annotations != nil, setOwners: body.OwnerReferences != nil,
		expected: body.ResourceVersion, dryRun: dry,
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resourcepb.FromProto(out))
}

// resourcePatch is a checked merge patch of a resource.
type resourcePatch struct {
	// patch is the merge patch without resource_version and namespace.
	patch []byte
	// rv is the resource_version precondition (0 when absent).
	rv int64
	// namespace is the namespace the patch names, which must be the
	// resource's (nil when absent).
	namespace *string
}

// parsePatch checks a merge patch: a JSON object with only spec, labels,
// annotations, resource_version and namespace, each of the right shape.
func parsePatch(data []byte) (*resourcePatch, error) {
	trimmed := bytes.TrimSpace(data)
	if !json.Valid(trimmed) {
		return nil, malformed(trimmed, nil)
	}
	if trimmed[0] != '{' {
		return nil, problem.New(problem.Invalid, problem.CodeInvalid, "a merge patch must be a JSON object").
			WithFields(problem.FieldError{Path: "", Message: "must be a JSON object"})
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &top); err != nil {
		return nil, malformed(trimmed, err)
	}
	errs := unknownPatchFields(top)
	out := &resourcePatch{}
	errs = out.takePreconditions(top, errs)
	errs = checkPatchValues(top, errs)
	if err := fieldsError("invalid merge patch", errs); err != nil {
		return nil, err
	}
	patch, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("re-encode patch: %w", err)
	}
	out.patch = patch
	return out, nil
}

// unknownPatchFields reports each member of the patch top that a patch may
// not hold, in key order.
func unknownPatchFields(top map[string]json.RawMessage) []problem.FieldError {
	var errs []problem.FieldError
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !isPatchField(k) {
			errs = append(errs, problem.FieldError{Path: "/" + resource.EscapePointer(k), Message: "unknown field: a patch may change only spec, labels, annotations and owner_references (resource_version is a precondition; namespace is immutable)"})
		}
	}
	return errs
}

// takePreconditions moves the patch's namespace and resource_version from
// top into p, appending to errs what is wrong with them.
func (p *resourcePatch) takePreconditions(top map[string]json.RawMessage, errs []problem.FieldError) []problem.FieldError {
	if raw, ok := top["namespace"]; ok {
		var ns string
		if err := json.Unmarshal(raw, &ns); err != nil {
			errs = append(errs, problem.FieldError{Path: "/namespace", Message: "must be a string: the resource's namespace, which cannot change"})
		}
		p.namespace = &ns
		delete(top, "namespace")
	}
	if raw, ok := top["resource_version"]; ok {
		if !isNull(raw) {
			if err := json.Unmarshal(raw, &p.rv); err != nil || p.rv < 0 {
				errs = append(errs, problem.FieldError{Path: "/resource_version", Message: "must be a positive integer"})
			}
		}
		delete(top, "resource_version")
	}
	return errs
}

// checkPatchValues appends to errs what is wrong with the shape of the
// patch's spec, owner_references, labels and annotations.
func checkPatchValues(top map[string]json.RawMessage, errs []problem.FieldError) []problem.FieldError {
	if raw, ok := top["spec"]; ok && !isNull(raw) && !isObject(raw) {
		errs = append(errs, problem.FieldError{Path: "/spec", Message: "must be a JSON object or null"})
	}
	if raw, ok := top["owner_references"]; ok && !isNull(raw) {
		var owners []resource.OwnerReference
		if err := json.Unmarshal(raw, &owners); err != nil {
			errs = append(errs, problem.FieldError{Path: "/owner_references", Message: "must be an array of owner references (it replaces the current list) or null to drop them all"})
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		if raw, ok := top[field]; ok && !isNull(raw) {
			errs = checkPatchStringMap(field, raw, errs)
		}
	}
	return errs
}

// checkPatchStringMap appends to errs what is wrong with raw, the patch of
// the string map field: an object whose values are strings, or null to
// remove a key.
func checkPatchStringMap(field string, raw json.RawMessage, errs []problem.FieldError) []problem.FieldError {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return append(errs, problem.FieldError{Path: "/" + field, Message: "must be a JSON object or null"})
	}
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		v := bytes.TrimSpace(entries[k])
		if !isNull(v) && v[0] != '"' {
			errs = append(errs, problem.FieldError{Path: "/" + field + "/" + resource.EscapePointer(k), Message: "must be a string, or null to remove the key"})
		}
	}
	return errs
}

// jsonPatchRoots are the members of a resource a JSON patch may touch.
var jsonPatchRoots = []string{"/spec", "/labels", "/annotations", "/owner_references"}

// parseJSONPatch checks a JSON patch (RFC 6902): an array of operations
// whose paths (and from) are inside spec, labels, annotations or
// owner_references.
func parseJSONPatch(data []byte) (jsonpatch.Patch, error) {
	trimmed := bytes.TrimSpace(data)
	if trimmed[0] != '[' {
		return nil, problem.New(problem.Invalid, problem.CodeInvalid, "a JSON patch must be a JSON array of operations").
			WithFields(problem.FieldError{Path: "", Message: "must be a JSON array"})
	}
	ops, err := jsonpatch.DecodePatch(trimmed)
	if err != nil {
		return nil, problem.New(problem.Invalid, problem.CodeMalformedJSON, "invalid JSON patch: %v", err)
	}
	var errs []problem.FieldError
	inside := func(p string) bool {
		return slices.ContainsFunc(jsonPatchRoots, func(r string) bool { return p == r || strings.HasPrefix(p, r+"/") })
	}
	for i, op := range ops {
		switch op.Kind() {
		case "add", "remove", "replace", "move", "copy", "test":
		default:
			errs = append(errs, problem.FieldError{Path: fmt.Sprintf("/%d/op", i), Message: "must be add, remove, replace, move, copy or test"})
			continue
		}
		for _, field := range []string{"path", "from"} {
			if field == "from" && op.Kind() != "move" && op.Kind() != "copy" {
				continue
			}
			p, err := op.Path()
			if field == "from" {
				p, err = op.From()
			}
			if err != nil || !inside(p) {
				errs = append(errs, problem.FieldError{Path: fmt.Sprintf("/%d/%s", i, field),
					Message: "must point inside /spec, /labels, /annotations or /owner_references"})
			}
		}
	}
	if err := fieldsError("invalid JSON patch", errs); err != nil {
		return nil, err
	}
	return ops, nil
}

// applyPatch applies a JSON patch (ops, when not nil) or else the merge
// patch to cur's spec, labels, annotations and owner references.
func applyPatch(cur *storev1.Resource, patch []byte, ops jsonpatch.Patch) (*patchDocument, error) {
	doc, err := resource.Marshal(patchDocument{Spec: orEmptyObject(cur.GetSpec()), Labels: orEmpty(cur.GetLabels()), Annotations: orEmpty(cur.GetAnnotations()),
		OwnerReferences: resourcepb.OwnerReferencesFromProto(cur.GetOwnerReferences())})
	if err != nil {
		return nil, fmt.Errorf("marshal patch target: %w", err)
	}
	var merged []byte
	switch {
	case ops != nil:
		merged, err = ops.Apply(doc)
		if errors.Is(err, jsonpatch.ErrTestFailed) {
			return nil, problem.New(problem.Conflict, problem.CodeConflict, "a test operation of the JSON patch failed: %v", err)
		}
		if err != nil {
			return nil, problem.New(problem.Invalid, problem.CodeInvalid, "the JSON patch cannot be applied: %v", err)
		}
	default:
		if merged, err = jsonpatch.MergePatch(doc, patch); err != nil {
			return nil, problem.New(problem.Invalid, problem.CodeMalformedJSON, "the merge patch cannot be applied: %v", err)
		}
	}
	var out patchDocument
	if err := json.Unmarshal(merged, &out); err != nil {
		return nil, decodeError(merged, err)
	}
	if isNull(out.Spec) {
		out.Spec = json.RawMessage("{}")
	}
	return &out, nil
}

func (s *Service) patchResource(c *echo.Context) error {
	id, dry, err := writeTarget(c)
	if err != nil {
		return err
	}
	data, err := readBody(c, mediaMergePatch, mediaJSON, mediaJSONPatch)
	if err != nil {
		return err
	}
	var (
		mp  = &resourcePatch{}
		ops jsonpatch.Patch
	)
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); mt == mediaJSONPatch {
		ops, err = parseJSONPatch(data)
	} else {
		mp, err = parsePatch(data)
	}
	if err != nil {
		return err
	}
	patch, rv := mp.patch, mp.rv
	c.SetRequest(c.Request().WithContext(withVerb(c.Request().Context(), rbac.VerbPatch)))
	retry := s.raceRetry(c.Request().Context())
	for {
		cur, err := s.storedResource(c.Request().Context(), rbac.VerbPatch, id)
		if err != nil {
			return err
		}
		if err := checkNamespaceKept(cur, mp.namespace); err != nil {
			return err
		}
		if rv != 0 && rv != cur.GetResourceVersion() {
			return staleError(id, cur.GetResourceVersion(), rv)
		}
		merged, err := applyPatch(cur, patch, ops)
		if err != nil {
			return err
		}
		spec, errs := checkSpec(merged.Spec, nil)
		errs = append(errs, resource.ValidateMetadata(merged.Labels, merged.Annotations, merged.OwnerReferences)...)
		if err := fieldsError("invalid resource after applying the patch", errs); err != nil {
			return err
		}
		next := resourcepb.FromProto(cur)
		next.Spec = spec
		next.Labels, next.Annotations = orEmpty(merged.Labels), orEmpty(merged.Annotations)
		setOwners := !slices.Equal(merged.OwnerReferences, next.OwnerReferences)
		if setOwners {
			next.OwnerReferences = merged.OwnerReferences
		}
		expected := rv
		if expected == 0 {
			expected = cur.GetResourceVersion()
		}
		out, err := s.writeUpdate(c.Request().Context(), update{
			cur: cur, next: next,
			setLabels:      !maps.Equal(next.Labels, orEmpty(cur.GetLabels())),
			setAnnotations: !maps.Equal(next.Annotations, orEmpty(cur.GetAnnotations())),
			setOwners:      setOwners,
			expected:       expected, dryRun: dry,
		})
		if pe := problem.As(err); pe != nil && pe.Code == problem.CodeConflict && rv == 0 {
			if err := retry.again(err); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		return writeJSON(c, http.StatusOK, resourcepb.FromProto(out))
	}
}

func (s *Service) deleteResource(c *echo.Context) error {
	id, dry, err := writeTarget(c)
	if err != nil {
		return err
	}
	rv, _, err := queryInt(c, "resource_version", 1, math.MaxInt64)
	if err != nil {
		return err
	}
	policy, err := propagationPolicy(c.QueryParam("propagation_policy"), "/propagation_policy")
	if err != nil {
		return err
	}
	out, err := s.deleteByID(c.Request().Context(), id, rv, policy, dry)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, resourcepb.FromProto(out))
}

// propagationPolicy parses a delete's propagation policy (the
// propagation_policy query parameter, the queue input's header): "" is
// Background; a value that names no policy is a 400 naming path, before
// anything is written.
func propagationPolicy(raw, path string) (lifecycle.Propagation, error) {
	p, err := lifecycle.ParsePropagation(raw)
	if err != nil {
		return "", problem.New(problem.Invalid, problem.CodeInvalid, "%s", err.Error()).
			WithFields(problem.FieldError{Path: path, Message: "must be Background, Foreground or Orphan"})
	}
	return p, nil
}

// deleteByID requests the deletion of resource id (at resource_version rv
// when rv > 0) with propagation policy p: DELETE /api/v1/resources/{id}
// and the queue input's delete share it.
func (s *Service) deleteByID(ctx context.Context, id, rv int64, p lifecycle.Propagation, dry bool) (*storev1.Resource, error) {
	retry := s.raceRetry(ctx)
	for {
		resp, err := s.admitDelete(ctx, id, rv, p, dry)
		// The validating webhooks saw one state; a change since then is
		// admitted again, unless the caller named the version to delete.
		if pe := problem.As(err); pe != nil && pe.Code == problem.CodeConflict && rv == 0 {
			if err := retry.again(err); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return resp.GetResource(), nil
	}
}

// admitDelete passes the current state of the resource through the
// validating webhooks that intercept DELETE, then deletes exactly that
// state with propagation policy p. A resource already deleting is not
// admitted again.
func (s *Service) admitDelete(ctx context.Context, id, rv int64, p lifecycle.Propagation, dry bool) (*storev1.DeleteResourceResponse, error) {
	cur, err := s.storedResource(ctx, rbac.VerbDelete, id)
	if err != nil {
		return nil, err
	}
	if rv != 0 && rv != cur.GetResourceVersion() {
		return nil, staleError(id, cur.GetResourceVersion(), rv)
	}
	if cur.GetDeletedAt() == nil {
		if _, err := callCtx(s, ctx, s.admission.AdmitResource, &admissionv1.AdmitResourceRequest{
			Operation: admissionv1.Operation_OPERATION_DELETE, Resource: cur, DryRun: dry, Requester: requester(ctx),
		}); err != nil {
			return nil, err
		}
	}
	return callCtx(s, ctx, s.store.DeleteResource, &storev1.DeleteResourceRequest{Id: id, ExpectedResourceVersion: cur.GetResourceVersion(), DryRun: dry,
		PropagationPolicy: string(p)})
}

func (s *Service) updateFinalizers(c *echo.Context) error {
	id, dry, err := writeTarget(c)
	if err != nil {
		return err
	}
	var body finalizersBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	errs := checkResourceVersion(body.ResourceVersion, nil)
	for i, f := range body.Add {
		if fe := names.Finalizer(fmt.Sprintf("/add/%d", i), f); fe != nil {
			errs = append(errs, *fe)
		}
	}
	for i, f := range body.Remove {
		if f == "" {
			errs = append(errs, problem.FieldError{Path: fmt.Sprintf("/remove/%d", i), Message: "must not be empty"})
		}
	}
	if err := fieldsError("invalid finalizers", errs); err != nil {
		return err
	}
	// Adding a reserved finalizer is its writer's; removing one is allowed
	// (break-glass for a stuck deletion) unless its rule is strict (the
	// propagation finalizers: the garbage collector's). A finalizer both
	// removed and added stays, so it counts as added.
	removed := slices.DeleteFunc(slices.Clone(body.Remove), func(f string) bool { return slices.Contains(body.Add, f) })
	if err := s.rest.Keys(c.Request().Context(), authz.Keys{Finalizers: removed}, authz.Keys{Finalizers: body.Add}); err != nil {
		return err
	}
	resp, err := call(s, c, s.store.UpdateFinalizers, &storev1.UpdateFinalizersRequest{
		Id: id, Add: body.Add, Remove: body.Remove, ExpectedResourceVersion: body.ResourceVersion, DryRun: dry,
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resourcepb.FromProto(resp.GetResource()))
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func orEmptyObject(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// visibleDocuments are the resource documents of docs that allow lets the
// caller see (a list over types or namespaces it may only partly read).
// A document that does not decode is left out.
func visibleDocuments(docs [][]byte, allow func(typ, ns, name string) bool) [][]byte {
	out := docs[:0:0]
	for _, d := range docs {
		var id struct {
			Type      string `json:"resource_type_name"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		}
		if json.Unmarshal(d, &id) == nil && allow(id.Type, id.Namespace, id.Name) {
			out = append(out, d)
		}
	}
	return out
}
