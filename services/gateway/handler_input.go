package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/tracing"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/manifest"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// The queue input's edge: Execute and Refuse implement
// queueinput.Executor. A message is one no8s document (the CLI's format,
// kind Resource); apply runs applyOp and delete runs deleteByID, exactly
// as POST /api/v1/resources/apply and DELETE /api/v1/resources/{id} do,
// and the answer is the one HTTP gives: the same status, headers and body.

var _ queueinput.Executor = (*Service)(nil)

// Execute runs one queue-input request and records it in the audit log.
// With tracing on it is a span of its own ("queue input"), continuing the
// trace the message names (Request.TraceContext): the admission and store
// calls, the change's outbox row and its event all join that trace.
func (s *Service) Execute(ctx context.Context, req queueinput.Request) queueinput.Answer {
	ctx, span := s.startInputSpan(ctx, req)
	e := audit.NewEntry()
	ctx = audit.WithEntry(ctx, e)
	a := s.execute(ctx, req)
	s.auditInput(ctx, req, e, a)
	endInputSpan(span, a)
	return a
}

// spanInput is the name of a queue-input request's span.
const spanInput = "queue input"

// startInputSpan starts the span of a queue-input request (nil when
// tracing is off), the child of the trace the message names.
func (s *Service) startInputSpan(ctx context.Context, req queueinput.Request) (context.Context, trace.Span) {
	if !s.cfg.Tracing.Enabled() {
		return ctx, nil
	}
	return s.cfg.Tracing.Tracer("github.com/no8s/no8s/services/gateway").Start(tracing.Decode(ctx, req.TraceContext), spanInput,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("no8s.input.operation", string(req.Op)),
			attribute.String("no8s.request_id", req.RequestID)))
}

// endInputSpan records the answer's status on span and ends it.
func endInputSpan(span trace.Span, a queueinput.Answer) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Int("no8s.input.status", a.Status))
	if a.Status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, a.Detail)
	}
	span.End()
}

// execute runs one queue-input request.
func (s *Service) execute(ctx context.Context, req queueinput.Request) queueinput.Answer {
	rid := req.RequestID
	if !validRequestID(rid) {
		rid = newRequestID()
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", rid)
	ctx, err := s.authenticateInput(ctx, req.Authorization)
	if err != nil {
		return s.Refuse(rid, err)
	}
	audit.EntryFrom(ctx).SetUser(audit.IdentityOf(authn.FromContext(ctx), audit.Identity{}))
	body, dry, err := inputRequest(req)
	if err == nil {
		audit.EntryFrom(ctx).SetObject(audit.Object{Kind: "Resource", Type: body.ResourceTypeName, Version: body.ResourceTypeVersion,
			Namespace: names.OrDefault(body.Namespace), Name: body.Name})
	}
	if err != nil {
		a := s.Refuse(rid, err)
		a.Malformed = true
		return a
	}
	var (
		status int
		header = map[string]string{}
		doc    *resource.Resource
	)
	switch req.Op {
	case queueinput.OpApply:
		out, err := s.applyOp(ctx, body, dry)
		if err != nil {
			return s.Refuse(rid, err)
		}
		status, header, doc = out.status(), out.header(), out.doc
	case queueinput.OpDelete:
		policy, err := propagationPolicy(req.PropagationPolicy, "/headers/"+subjects.InputPropagationPolicyHeader)
		if err != nil {
			a := s.Refuse(rid, err)
			a.Malformed = true
			return a
		}
		out, err := s.deleteByName(ctx, body, policy, dry)
		if err != nil {
			return s.Refuse(rid, err)
		}
		status, doc = http.StatusAccepted, resourcepb.FromProto(out)
	default:
		a := s.Refuse(rid, problem.Invalidf("unknown operation %q", req.Op))
		a.Malformed = true
		return a
	}
	b, err := resource.Marshal(doc)
	if err != nil {
		return s.Refuse(rid, fmt.Errorf("marshal answer: %w", err))
	}
	header[HeaderRequestID] = rid
	return queueinput.Answer{Status: status, Header: header, Body: b}
}

// Refuse answers err as the HTTP API would.
func (s *Service) Refuse(requestID string, err error) queueinput.Answer {
	status, body, detail := s.errorDocument(context.Background(), requestID, err)
	h := map[string]string{HeaderRequestID: requestID}
	if status == http.StatusServiceUnavailable {
		h["Retry-After"] = strconv.Itoa(RetryAfterSeconds)
	}
	return queueinput.Answer{Status: status, Header: h, Body: body, Detail: detail}
}

// inputRequest turns a message into the body of POST
// /api/v1/resources/apply: exactly one Resource document, checked by the
// rules every HTTP body meets (strictjson), and the dry-run header.
func inputRequest(req queueinput.Request) (applyResourceBody, bool, error) {
	var body applyResourceBody
	if len(req.Document) > names.MaxRequestBytes {
		return body, false, tooLarge()
	}
	dry := false
	switch req.DryRun {
	case "", "false":
	case "true":
		dry = true
	default:
		return body, false, problem.New(problem.Invalid, problem.CodeInvalid, "%s must be true or false, not %q", subjects.InputDryRunHeader, req.DryRun).
			WithFields(problem.FieldError{Path: "/headers/" + subjects.InputDryRunHeader, Message: "must be true or false"})
	}
	if strings.TrimSpace(string(req.Document)) == "" {
		return body, false, problem.New(problem.Invalid, problem.CodeMalformedJSON, "the message is empty: it must carry one no8s document of kind Resource")
	}
	docs, err := manifest.Parse("message", req.Document)
	if err != nil {
		return body, false, documentError(err)
	}
	if len(docs) != 1 {
		return body, false, problem.New(problem.Invalid, problem.CodeInvalid, "a message carries exactly one document; this one has %d", len(docs))
	}
	r := docs[0].Resource
	if r == nil {
		return body, false, problem.New(problem.Invalid, problem.CodeInvalid, "the queue input takes documents of kind Resource, not %s", docs[0].Kind).
			WithFields(problem.FieldError{Path: "/kind", Message: "must be Resource"})
	}
	body = applyResourceBody{Namespace: r.Namespace, Name: r.Name, ResourceTypeName: r.TypeName, ResourceTypeVersion: r.TypeVersion, Spec: r.Spec}
	if r.Labels != nil {
		body.Labels = &r.Labels
	}
	if r.Annotations != nil {
		body.Annotations = &r.Annotations
	}
	// The document as the HTTP body it stands for meets the same rules.
	data, err := json.Marshal(body)
	if err != nil {
		return body, false, problem.New(problem.Invalid, problem.CodeMalformedJSON, "the document cannot be encoded as JSON: %v", err)
	}
	if perr := strictjson.Check(data, ""); perr != nil {
		return body, false, perr
	}
	return body, dry, nil
}

// documentError turns the document format's errors into one Invalid
// error: the details joined, the fields by JSON pointer into the document.
func documentError(err error) error {
	var (
		details []string
		fields  []problem.FieldError
	)
	for _, e := range unjoin(err) {
		var me *manifest.Error
		if errors.As(e, &me) {
			details = append(details, me.Detail)
			fields = append(fields, me.Fields...)
			continue
		}
		details = append(details, e.Error())
	}
	code := problem.CodeInvalid
	if len(fields) == 0 {
		code = problem.CodeMalformedJSON
	}
	return problem.New(problem.Invalid, code, "the message is not a valid no8s document: %s", strings.Join(details, "; ")).WithFields(fields...)
}

// unjoin lists the errors an errors.Join holds (err itself otherwise).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// deleteByName requests the deletion of the resource a document names, as
// DELETE /api/v1/resources/{id} does for its id.
func (s *Service) deleteByName(ctx context.Context, body applyResourceBody, p lifecycle.Propagation, dry bool) (*storev1.Resource, error) {
	body.Namespace = names.OrDefault(body.Namespace)
	if fe := names.Namespace("/namespace", body.Namespace); fe != nil {
		return nil, fieldsError("invalid resource", []problem.FieldError{*fe})
	}
	if err := s.authorizeByName(ctx, body.ResourceTypeName, body.Namespace, body.Name, rbac.VerbDelete); err != nil {
		return nil, err
	}
	resp, err := callCtx(s, ctx, s.store.GetResource, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: &storev1.ResourceName{
		ResourceTypeName: body.ResourceTypeName, ResourceTypeVersion: body.ResourceTypeVersion, Namespace: body.Namespace, Name: body.Name,
	}}})
	if err != nil {
		return nil, err
	}
	return s.deleteByID(ctx, resp.GetResource().GetId(), 0, p, dry)
}

// authenticateInput checks a message's credentials as authenticate
// checks a request's: the answer to a refused one is the 401 HTTP gives.
func (s *Service) authenticateInput(ctx context.Context, authorization string) (context.Context, error) {
	if s.cfg.Auth.Open() {
		return authn.WithPrincipal(ctx, anonymous), nil
	}
	token := ""
	if authorization != "" {
		t, ok := authn.BearerToken(authorization)
		if !ok {
			return ctx, unauthenticated(&authn.InvalidError{Reason: "the Authorization header is not a Bearer credential"})
		}
		token = t
	}
	p, err := s.authn.Authenticate(ctx, token)
	if err != nil {
		return ctx, unauthenticated(err)
	}
	return authn.WithPrincipal(ctx, p), nil
}
