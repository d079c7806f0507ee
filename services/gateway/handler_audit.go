package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/problem"
)

// The audit log (package audit, docs/security.md "Audit log"): one record
// per write (any method but GET, HEAD and OPTIONS) and per denied request
// (401, 403, or marked denied by a layer: audit.EntryFrom(ctx).Deny), on
// the REST API and the queue input alike.

// AuditConfig configures the audit log.
type AuditConfig struct {
	// Log receives one JSON line per record (nil: no audit log). The
	// gateway's main opens --audit-log (stderr by default).
	Log io.Writer
	// Stream publishes the records on the audit stream NO8S_AUDIT too,
	// which the gateway creates or updates at start (needs JetStream).
	Stream bool
	// MaxAge and MaxBytes are the stream's retention: records older or
	// beyond are dropped, oldest first (defaults: 720h, no size limit).
	MaxAge   time.Duration
	MaxBytes int64
	// QueueSize bounds the records waiting to be written; beyond, they
	// are dropped and counted (default audit.DefaultQueueSize).
	QueueSize int
}

// newAuditRecorder is the recorder of cfg.Audit (nil: nothing audited).
func newAuditRecorder(cfg Config, s *Service) *audit.Recorder {
	ac := audit.Config{Log: cfg.Audit.Log, QueueSize: cfg.Audit.QueueSize, DrainTimeout: cfg.ShutdownGrace, Metrics: cfg.Metrics,
		Stream: audit.StreamConfig{MaxAge: cfg.Audit.MaxAge, MaxBytes: cfg.Audit.MaxBytes}}
	if cfg.Audit.Stream {
		if cfg.JetStream == nil {
			s.log.Warn("the audit stream needs NATS JetStream: audit records go to the audit log only")
		} else {
			ac.JetStream = cfg.JetStream
		}
	}
	return audit.New(ac, s.log.With("component", "audit"))
}

// RunAudit writes the audit records until ctx ends, then what is still
// queued. ServeListeners runs it itself, stopping it after the servers and
// the queue input; it returns at once without an audit log or stream.
func (s *Service) RunAudit(ctx context.Context) error {
	return s.audit.Run(ctx)
}

// startAudit runs RunAudit beside the servers; the returned func stops it
// once they are done, and waits for the queue to drain.
func (s *Service) startAudit(ctx context.Context) (stop func()) {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.RunAudit(actx)
	}()
	return func() { cancel(); <-done }
}

// maxAnswerCapture bounds how much of a write's answer auditRequest keeps
// to name its object.
const maxAnswerCapture = 64 << 10

// auditRequest records each write and each denied request once it is
// answered. It runs before authentication, so that a refused credential
// (401) is recorded too; the principal is read from the request's
// context once the handler returned. Like accessLog it answers errors
// itself, so that the status it records is the one sent.
//
// The request carries an audit.Entry that later layers fill (the object,
// the verb, a denial); what they left unknown comes from the route (its
// template and parameters) and, for a write answered 2xx, the JSON
// document answering it (only its id, name, namespace, type and version).
func (s *Service) auditRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if s.audit == nil {
			return next(c)
		}
		req := c.Request()
		e := audit.NewEntry()
		c.SetRequest(req.WithContext(audit.WithEntry(req.Context(), e)))
		write := isWrite(req.Method)
		var answer *answerCapture
		if write {
			answer = &answerCapture{ResponseWriter: c.Response()}
			c.SetResponse(answer)
		}
		err := next(c)
		reason := ""
		if err != nil {
			reason = denialReason(err)
			s.handleError(c, err)
		}
		if answer != nil {
			c.SetResponse(answer.ResponseWriter)
		}
		status := http.StatusOK
		if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Status != 0 {
			status = r.Status
		}
		st := e.State()
		if !write && !st.Denied && status != http.StatusUnauthorized && status != http.StatusForbidden {
			return nil
		}
		route := c.Path()
		if unmatched, _ := c.Get(ctxKeyUnmatched).(bool); unmatched {
			route = ""
		}
		r := c.Request()
		rec := audit.HTTPRecord(r, route)
		rec.User.TokenID = s.presentedTokenID(rec.User.TokenID)
		rec.RequestID, rec.Status, rec.Reason = requestIDOf(c), status, reason
		rec.Verb = audit.VerbOf(r.Method, route)
		rec.User = auditIdentity(r.Context(), rec.User)
		rec.Object = audit.RouteObject(route, c.Param)
		if answer != nil && status < 300 {
			rec.Object = rec.Object.Or(audit.AnswerObject(rec.Object.Kind, answer.body))
		}
		s.audit.Record(r.Context(), rec.Complete(st))
		return nil
	}
}

// presentedTokenID is id, the id part of a presented API token, unless the
// bootstrap token has the API tokens' shape with that id (`no8s dev`'s
// has): the bootstrap token is a secret as a whole, and none of it is
// recorded, even refused with a typo.
func (s *Service) presentedTokenID(id string) string {
	if id == "" || s.cfg.Auth.BootstrapToken == "" {
		return id
	}
	if bid, _, err := authn.ParseToken(s.cfg.Auth.BootstrapToken); err == nil && bid == id {
		return ""
	}
	return id
}

// isWrite reports whether a request with method is a write: any method
// but GET, HEAD and OPTIONS.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// auditIdentity is who the request's context says sent it: its
// principal, or the service whose certificate it presented; presented
// (the id of the API token it sent) when it has neither.
func auditIdentity(ctx context.Context, presented audit.Identity) audit.Identity {
	if p := authn.FromContext(ctx); p != nil {
		return audit.IdentityOf(p, presented)
	}
	if id, ok := authz.Caller(ctx); ok {
		return audit.Identity{Username: "service:" + id.String(), AuthMethod: "identity"}
	}
	return presented
}

// denialReason is the short reason recorded when err turns out a denial:
// why a credential was refused (the authenticator's reason, never the
// credential), the detail of a Forbidden problem, the code of another
// refusal (cross_origin).
func denialReason(err error) string {
	var he *httpError
	if errors.As(err, &he) {
		if he.status == http.StatusUnauthorized {
			return he.detail
		}
		return he.code
	}
	if pe := problem.As(err); pe != nil && pe.Kind == problem.Forbidden {
		return pe.Detail
	}
	return ""
}

// answerCapture keeps the first maxAnswerCapture bytes of an answer.
type answerCapture struct {
	http.ResponseWriter
	body []byte
}

func (w *answerCapture) Write(p []byte) (int, error) {
	if room := maxAnswerCapture - len(w.body); room > 0 {
		w.body = append(w.body, p[:min(room, len(p))]...)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap is the writer beneath (echo.UnwrapResponse,
// http.ResponseController).
func (w *answerCapture) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditInput records one queue-input request: its identity (set by
// execute once authenticated), the document's object and the answer. A
// message delivered again after a 5xx is recorded at each execution; the
// listener's own refusals (a reused key, a message given up) run nothing
// and are not recorded.
func (s *Service) auditInput(ctx context.Context, req queueinput.Request, e *audit.Entry, a queueinput.Answer) {
	if s.audit == nil {
		return
	}
	rec := audit.Record{Source: audit.SourceNATS, RequestID: a.Header[HeaderRequestID], Verb: string(req.Op),
		Status: a.Status, DryRun: req.DryRun == "true", Object: audit.Object{Kind: "Resource"}}
	if a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden {
		rec.Reason = a.Detail
	}
	if tok, ok := authn.BearerToken(req.Authorization); ok {
		if id, _, err := authn.ParseToken(tok); err == nil {
			rec.User.TokenID = s.presentedTokenID(id)
		}
	}
	if a.OK() {
		rec.Object = rec.Object.Or(audit.AnswerObject("Resource", a.Body))
	}
	s.audit.Record(ctx, rec.Complete(e.State()))
}
