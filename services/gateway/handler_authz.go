package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/services/gateway/watch"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/reconcilers"
)

// Authorization: every route asks, through authorize, whether the caller's
// roles allow its verb on its object (package rbac). Service identities on
// the service listener keep their fixed rights (authz.REST); a gateway
// with authentication off lets everyone do everything.

// rolesPage is the page size of reading the roles and bindings.
const rolesPage = 500

// newRoles returns the cache of roles and bindings the gateway decides
// with, read from the store.
func (s *Service) newRoles() *rbac.Cache {
	var recTypes map[string][]string
	load := func(ctx context.Context) ([]rbac.Object, error) {
		var out []rbac.Object
		needRegistry := false
		for _, typ := range []string{rbac.RoleType, rbac.RoleBindingType, rbac.ClusterRoleType, rbac.ClusterRoleBindingType} {
			cont := ""
			for {
				resp, err := s.store.ListResources(ctx, &storev1.ListResourcesRequest{
					ResourceTypeName: typ, ResourceTypeVersion: rbac.Version, Limit: rolesPage, ContinueToken: cont,
				})
				if err != nil {
					return nil, fmt.Errorf("list %s: %w", typ, err)
				}
				for _, r := range resp.GetResources() {
					if r.GetDeletedAt() != nil {
						continue
					}
					out = append(out, rbac.Object{Type: typ, Namespace: r.GetNamespace(), Name: r.GetName(), Spec: r.GetSpec()})
					needRegistry = needRegistry || strings.Contains(string(r.GetSpec()), rbac.ReconcilerRolePrefix)
				}
				if cont = resp.GetContinueToken(); cont == "" {
					break
				}
			}
		}
		recTypes = nil
		if needRegistry && s.cfg.JetStream != nil {
			reg, err := reconcilers.Read(ctx, s.cfg.JetStream)
			if err != nil {
				return nil, fmt.Errorf("read the reconciler registry: %w", err)
			}
			recTypes = map[string][]string{}
			for t, owner := range reg.Owners {
				recTypes[owner] = append(recTypes[owner], t.Name)
			}
		}
		return out, nil
	}
	// The cache reads (load) and evaluates (reconcilerTypes) under its own
	// lock, one read at a time: recTypes is the last read's.
	types := func(name string) []string { return recTypes[name] }
	return rbac.NewCache(load, types, s.cfg.Auth.RolesRefresh, s.cfg.Auth.RolesMaxStaleness, s.log.With("component", "roles"))
}

// callerPrincipal is the principal a decision is about, and whether the
// caller is a service identity (fixed rights: no decision).
func callerPrincipal(ctx context.Context) (*authn.Principal, bool) {
	if _, ok := authz.Caller(ctx); ok {
		return nil, true
	}
	return authn.FromContext(ctx), false
}

// allowed reports whether the caller of ctx may make r.
func (s *Service) allowed(ctx context.Context, r rbac.Request) (bool, error) {
	p, service := callerPrincipal(ctx)
	if service {
		return true, nil
	}
	ok, err := s.roles.Allowed(ctx, p, r)
	if err != nil {
		return false, problem.New(problem.Unavailable, problem.CodeUnavailable, "cannot decide: %v", err)
	}
	return ok, nil
}

// authorize refuses (403) a request the caller's roles do not allow.
func (s *Service) authorize(ctx context.Context, r rbac.Request) error {
	ok, err := s.allowed(ctx, r)
	if err != nil {
		return err
	}
	if !ok {
		return forbidden(ctx, r)
	}
	return nil
}

// forbidden is the 403 of a refused request, marked denied in its audit
// record.
func forbidden(ctx context.Context, r rbac.Request) error {
	audit.EntryFrom(ctx).Deny("no role grants " + r.String())
	who := "anonymous"
	if p := authn.FromContext(ctx); p != nil {
		who = p.Username
	}
	return problem.New(problem.Forbidden, problem.CodeDenied, "%s may not %s: no role of theirs grants it (no8s auth can-i %s %s tells; an administrator binds roles)",
		who, r, r.Verb, r.Type)
}

// objectRequest is verb on the stored resource r.
func objectRequest(verb string, r *storev1.Resource) rbac.Request {
	ns := r.GetNamespace()
	if rbac.IsClusterScoped(r.GetResourceTypeName()) {
		ns = ""
	}
	return rbac.Request{Verb: verb, Type: r.GetResourceTypeName(), Namespace: ns, Name: r.GetName()}
}

// newObjectRequest is verb on a resource not stored yet (or named by a
// request), of typ in ns (the default namespace when empty).
func newObjectRequest(verb, typ, ns, name string) rbac.Request {
	ns = names.OrDefault(ns)
	if rbac.IsClusterScoped(typ) {
		ns = ""
	}
	return rbac.Request{Verb: verb, Type: typ, Namespace: ns, Name: name}
}

// authorizeStored decides verb on the stored resource r, addressed by id: a
// caller who may not even read it gets the answer of a resource that does
// not exist (404), so ids do not tell what exists; one who may read it but
// not do verb gets 403.
func (s *Service) authorizeStored(ctx context.Context, verb string, r *storev1.Resource) error {
	req := objectRequest(verb, r)
	ok, err := s.allowed(ctx, req)
	if err != nil || ok {
		return err
	}
	if verb != rbac.VerbGet {
		if canGet, err := s.allowed(ctx, objectRequest(rbac.VerbGet, r)); err != nil {
			return err
		} else if canGet {
			return forbidden(ctx, req)
		}
	}
	// Answered as if it did not exist, recorded as the denial it is.
	e := audit.EntryFrom(ctx)
	e.SetObject(audit.Object{Kind: "Resource", Type: r.GetResourceTypeName(), Version: r.GetResourceTypeVersion(),
		Namespace: r.GetNamespace(), Name: r.GetName(), ID: strconv.FormatInt(r.GetId(), 10)})
	e.Deny("no role grants " + req.String())
	return problem.NotFoundf("resource %d not found", r.GetId())
}

// authorizeByName decides a request that addresses an object by name
// before the store is read (apply, the queue input's delete): a caller who
// may do none of verbs on it is refused (403) alike whether it exists or
// not, as GET by name is. The stored object is decided again once read.
func (s *Service) authorizeByName(ctx context.Context, typ, ns, name string, verbs ...string) error {
	for _, v := range verbs {
		if ok, err := s.allowed(ctx, newObjectRequest(v, typ, ns, name)); err != nil || ok {
			return err
		}
	}
	return forbidden(ctx, newObjectRequest(verbs[0], typ, ns, name))
}

// storedResource reads resource id and decides verb on it.
func (s *Service) storedResource(ctx context.Context, verb string, id int64) (*storev1.Resource, error) {
	r, err := s.getResourceByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.authorizeStored(ctx, verb, r); err != nil {
		return nil, err
	}
	return r, nil
}

// authorizeByID decides verb on the resource of the request's {id}.
func (s *Service) authorizeByID(c *echo.Context, verb string) error {
	if p, service := callerPrincipal(c.Request().Context()); service || rbac.IsAdmin(p) {
		return nil
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	_, err = s.storedResource(c.Request().Context(), verb, id)
	return err
}

// verbKey carries the verb of a write that is not a plain create or update
// (a patch) down to admitAndWrite.
type verbKey struct{}

// withVerb returns ctx whose writes are authorized as verb.
func withVerb(ctx context.Context, verb string) context.Context {
	return context.WithValue(ctx, verbKey{}, verb)
}

// authorizeWrite decides a create (old nil) or an update of the resource
// new: the verb of ctx (withVerb), else create or update. An update of a
// resource the caller may not read is answered as if it did not exist.
func (s *Service) authorizeWrite(ctx context.Context, old, new *storev1.Resource) error {
	verb, _ := ctx.Value(verbKey{}).(string)
	if old == nil {
		if verb == "" {
			verb = rbac.VerbCreate
		}
		return s.authorize(ctx, newObjectRequest(verb, new.GetResourceTypeName(), new.GetNamespace(), new.GetName()))
	}
	if verb == "" {
		verb = rbac.VerbUpdate
	}
	return s.authorizeStored(ctx, verb, old)
}

// authorizeGrant decides whether the caller may write the role or binding
// r (admitted, about to be stored): a role may grant only rights its
// writer holds, unless the writer may escalate; a binding may grant only a
// role whose rights its writer holds, unless the writer may bind it.
func (s *Service) authorizeGrant(ctx context.Context, r *storev1.Resource) error {
	typ := r.GetResourceTypeName()
	if !rbac.IsRoleType(typ) || r.GetResourceTypeVersion() != rbac.Version {
		return nil
	}
	p, service := callerPrincipal(ctx)
	if service || rbac.IsAdmin(p) {
		return nil
	}
	pol, err := s.roles.Policy(ctx)
	if err != nil {
		return problem.New(problem.Unavailable, problem.CodeUnavailable, "cannot decide: %v", err)
	}
	ns := r.GetNamespace()
	if rbac.IsClusterScoped(typ) {
		ns = ""
	}
	switch typ {
	case rbac.RoleType, rbac.ClusterRoleType:
		var spec rbac.RoleSpec
		if err := json.Unmarshal(r.GetSpec(), &spec); err != nil {
			return problem.Invalidf("%s spec: %v", typ, err)
		}
		err = pol.MayWriteRole(p, typ, ns, r.GetName(), spec.Rules)
	default:
		var spec rbac.BindingSpec
		if err := json.Unmarshal(r.GetSpec(), &spec); err != nil {
			return problem.Invalidf("%s spec: %v", typ, err)
		}
		err = pol.MayBind(p, ns, spec.RoleRef)
	}
	if err != nil {
		return problem.New(problem.Forbidden, problem.CodeDenied, "%v", err)
	}
	return nil
}

// listFilter decides a list or watch over many resources (verb list or
// watch) of typ ("" every type) in ns ("" every namespace): nil when the
// caller may see all of them; else a filter of what it may see. A list
// naming both type and namespace that the caller may not make is refused
// (403): nothing about what exists is told.
func (s *Service) listFilter(ctx context.Context, verb, typ, ns string) (func(typ, ns, name string) bool, error) {
	p, service := callerPrincipal(ctx)
	if service || rbac.IsAdmin(p) {
		return nil, nil
	}
	if typ != "" && (ns != "" || rbac.IsClusterScoped(typ)) {
		if err := s.authorize(ctx, newObjectRequest(verb, typ, ns, "")); err != nil {
			return nil, err
		}
		return nil, nil
	}
	anyType := typ
	if anyType == "" {
		anyType = rbac.Wildcard
	}
	pol, err := s.roles.Policy(ctx)
	if err != nil {
		return nil, problem.New(problem.Unavailable, problem.CodeUnavailable, "cannot decide: %v", err)
	}
	if !pol.AllowedAnywhere(p, verb, anyType) {
		return nil, forbidden(ctx, rbac.Request{Verb: verb, Type: anyType, Namespace: ns})
	}
	return func(t, n, name string) bool {
		// A stream outlives one Policy: ask the cache's current one
		// without waiting (the hub asks while it fans out); a watch whose
		// rights cannot be read recently enough ends (watchRights).
		cur := s.roles.Peek(context.WithoutCancel(ctx))
		if cur == nil {
			return false
		}
		if rbac.IsClusterScoped(t) {
			n = ""
		}
		return cur.Allowed(p, rbac.Request{Verb: verb, Type: t, Namespace: n, Name: name})
	}, nil
}

// accessReviewBody is POST /api/v1/access-review: may the caller do this?
type accessReviewBody = client.AccessReview

// accessReview answers whether the caller may make the request of the body
// (no8s auth can-i).
func (s *Service) accessReview(c *echo.Context) error {
	var body accessReviewBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	var errs []problem.FieldError
	if body.Verb != rbac.Wildcard && !slices.Contains(rbac.Verbs(), body.Verb) {
		errs = append(errs, problem.FieldError{Path: "/verb", Message: fmt.Sprintf("%q is not a verb: %s", body.Verb, strings.Join(rbac.Verbs(), ", "))})
	}
	if body.Type == "" {
		errs = append(errs, problem.FieldError{Path: "/type", Message: "required: a resource type name, a global kind or *"})
	}
	if body.Namespace != "" {
		if fe := names.Namespace("/namespace", body.Namespace); fe != nil {
			errs = append(errs, *fe)
		}
	}
	if err := fieldsError("invalid access review", errs); err != nil {
		return err
	}
	req := rbac.Request{Verb: body.Verb, Type: body.Type, Namespace: body.Namespace, Name: body.Name}
	// A global object is decided with no namespace, except bind on a
	// ClusterRole: a RoleBinding names it in its own namespace, and
	// authorizeGrant decides it there (rbac.Policy.MayBind).
	if rbac.IsClusterScoped(body.Type) && body.Verb != rbac.VerbBind {
		req.Namespace = ""
	}
	ok, err := s.allowed(c.Request().Context(), req)
	if err != nil {
		return err
	}
	out := client.AccessReviewResult{AccessReview: body, Allowed: ok}
	if !ok {
		out.Reason = "no role of yours grants " + req.String()
	}
	return writeJSON(c, http.StatusOK, out)
}

// require is the route middleware of a global kind's routes (resource
// types, webhooks, namespaces, the reconcilers): verb on kind, any name.
func (s *Service) require(verb, kind string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			if err := s.authorize(c.Request().Context(), rbac.Request{Verb: verb, Type: kind}); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// requireStored is the route middleware of a resource's {id} routes that
// neither write it through admission nor delete it: verb on the resource.
func (s *Service) requireStored(verb string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			if err := s.authorizeByID(c, verb); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// watchRights returns ctx canceled once may no longer holds: a watch ends
// within a recheck interval (Auth.StreamRecheck) of the roles that allowed
// it being taken away, or of the roles becoming unreadable (the client
// resumes from its last event, and is decided again).
func (s *Service) watchRights(ctx context.Context, may func(ctx context.Context) (bool, error)) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		t := time.NewTicker(s.cfg.Auth.StreamRecheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				ok, err := may(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil || !ok {
					reason := "its roles no longer allow it"
					if err != nil {
						reason = err.Error()
					}
					s.log.Info("event stream ended", "reason", reason)
					cancel(errors.New("event stream ended: " + reason))
					return
				}
			}
		}
	}()
	return ctx
}

// authorizeWatch decides a watch of f (a resource's, when f.ResourceID is
// set; the route decided that one) and returns the request context the
// stream runs under: ended once the caller's roles no longer allow the
// watch. A watch over types or namespaces the caller may only partly see
// gets f.Allow, the filter of what it may see.
func (s *Service) authorizeWatch(c *echo.Context, f *watch.Filter) error {
	ctx := c.Request().Context()
	p, service := callerPrincipal(ctx)
	if service || rbac.IsAdmin(p) {
		return nil
	}
	var may func(context.Context) (bool, error)
	if f.ResourceID != 0 {
		// The route decided the watch on the stored resource; its type,
		// namespace and name never change.
		r, err := s.storedResource(ctx, rbac.VerbWatch, f.ResourceID)
		if err != nil {
			return err
		}
		req := objectRequest(rbac.VerbWatch, r)
		may = func(ctx context.Context) (bool, error) { return s.allowed(ctx, req) }
	} else {
		allow, err := s.listFilter(ctx, rbac.VerbWatch, f.TypeName, f.Namespace)
		if err != nil {
			return err
		}
		f.Allow = allow
		typ, ns := f.TypeName, f.Namespace
		may = func(ctx context.Context) (bool, error) {
			if allow == nil {
				return s.allowed(ctx, newObjectRequest(rbac.VerbWatch, typ, ns, ""))
			}
			pol, err := s.roles.Policy(ctx)
			if err != nil {
				return false, err
			}
			if typ == "" {
				typ = rbac.Wildcard
			}
			return pol.AllowedAnywhere(p, rbac.VerbWatch, typ), nil
		}
	}
	c.SetRequest(c.Request().WithContext(s.watchRights(ctx, may)))
	return nil
}

// requester is who admission is told asks for a write (and webhooks,
// its username and groups): the authenticated caller, whose credential
// grants bound to subjects are theirs to use; for a service identity its
// system user (authz.SystemUser: the garbage collector's under its
// fenced lease), marked service.
func requester(ctx context.Context) *admissionv1.Requester {
	if id, ok := authz.Caller(ctx); ok {
		return &admissionv1.Requester{Username: authz.SystemUser(id, fenceLease(ctx)), Groups: []string{authz.ServicesGroup}, Service: true}
	}
	p := authn.FromContext(ctx)
	if p == nil {
		return nil
	}
	return &admissionv1.Requester{Username: p.Username, Groups: p.Groups, TokenId: p.TokenID}
}
