package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/api/names"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/gateway/watch"
	"github.com/no8s/no8s/services/internal/labelselector"
	"github.com/no8s/no8s/services/internal/problem"
)

// HeaderLastEventID is the SSE resume header a reconnecting EventSource sends.
const HeaderLastEventID = "Last-Event-ID"

// codeGone answers a resume point older than the retained event history.
const codeGone = "gone"

// codeTooNew answers a resume point ahead of the newest revision.
const codeTooNew = "too_new"

// watchReadyWait bounds how long a watch waits for the event hub to follow
// the stream (at gateway start) before answering 503.
const watchReadyWait = 5 * time.Second

// watchEvents serves GET /api/v1/events: every change matching the
// namespace, resource_type, resource_type_version and label_selector
// filters (no namespace: every namespace).
func (s *Service) watchEvents(c *echo.Context) error {
	var f watch.Filter
	var errs []problem.FieldError
	if ns := c.QueryParam("namespace"); ns != "" {
		if fe := names.Namespace("/namespace", ns); fe != nil {
			errs = append(errs, *fe)
		}
		f.Namespace = ns
	}
	if t := c.QueryParam("resource_type"); t != "" {
		if fe := names.TypeName("/resource_type", t); fe != nil {
			errs = append(errs, *fe)
		}
		f.TypeName = t
	}
	if v := c.QueryParam("resource_type_version"); v != "" {
		if fe := names.TypeVersion("/resource_type_version", v); fe != nil {
			errs = append(errs, *fe)
		}
		f.TypeVersion = v
	}
	if sel := c.QueryParam("label_selector"); sel != "" {
		parsed, err := labelselector.Parse(sel)
		if err != nil {
			errs = append(errs, problem.FieldError{Path: "/label_selector", Message: err.Error()})
		}
		f.Selector = parsed
	}
	if err := fieldsError("invalid watch parameters", errs); err != nil {
		return err
	}
	return s.serveWatch(c, f)
}

// watchResourceEvents serves GET /api/v1/resources/{id}/events: the changes
// of one resource. A resource that no longer exists can still be watched
// from a resume point (to see its last changes up to PURGED).
func (s *Service) watchResourceEvents(c *echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	f := watch.Filter{ResourceID: id}
	if s.events != nil {
		resp, err := call(s, c, s.store.GetResource, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Id{Id: id}})
		switch {
		case err == nil:
			// Its type and version let the stream filter server-side.
			f.TypeName = resp.GetResource().GetResourceTypeName()
			f.TypeVersion = resp.GetResource().GetResourceTypeVersion()
		case problem.KindOf(err) == problem.NotFound:
			if _, ok, perr := resumePoint(c); perr != nil || !ok {
				return err
			}
		default:
			return err
		}
	}
	return s.serveWatch(c, f)
}

// serveWatch resolves the resume point, answers 410 when it is too old, and
// streams.
func (s *Service) serveWatch(c *echo.Context, f watch.Filter) error {
	if s.events == nil {
		return problem.New(problem.Unavailable, problem.CodeUnavailable, "event streaming is not configured on this gateway (no NATS connection)")
	}
	if err := s.authorizeWatch(c, &f); err != nil {
		return err
	}
	since, resume, err := resumePoint(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	wctx, cancel := context.WithTimeout(ctx, watchReadyWait)
	err = s.events.WaitReady(wctx)
	cancel()
	if err != nil {
		return problem.New(problem.Unavailable, problem.CodeUnavailable, "the event stream is not available yet; retry later")
	}
	start := watch.Now()
	if resume {
		rctx, cancel := s.backendCtx(c)
		start, err = s.events.Resolve(rctx, since)
		cancel()
		var gone *watch.GoneError
		if errors.As(err, &gone) {
			return problem.New(problem.Gone, codeGone,
				"%s: list the resources again (GET /api/v1/resources) and watch from the list's %s", gone.Error(), HeaderResourceVersion)
		}
		var tooNew *watch.TooNewError
		if errors.As(err, &tooNew) {
			return problem.New(problem.Invalid, codeTooNew,
				"%s: list the resources again (GET /api/v1/resources) and watch from the list's %s", tooNew.Error(), HeaderResourceVersion)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return problem.New(problem.Unavailable, problem.CodeUnavailable, "the event stream is not available: %v", err)
		}
	}
	if isHead(c) {
		c.Response().Header().Set(echo.HeaderContentType, "text/event-stream")
		return c.NoContent(http.StatusOK)
	}
	if err := s.events.Stream(ctx, c.Response(), f, start); err != nil {
		s.log.Debug("watch ended", "err", err, "request_id", requestIDOf(c))
	}
	return nil
}

// resumePoint reads the revision to resume after: the Last-Event-ID header
// (what a reconnecting EventSource sends) wins over the since parameter.
func resumePoint(c *echo.Context) (int64, bool, error) {
	if v := strings.TrimSpace(c.Request().Header.Get(HeaderLastEventID)); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, false, problem.New(problem.Invalid, problem.CodeInvalid, "header %s must be a revision (a non-negative integer), not %q", HeaderLastEventID, v)
		}
		return n, true, nil
	}
	if _, ok := c.QueryParams()["since"]; !ok {
		return 0, false, nil
	}
	v := c.QueryParam("since")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false, problem.Field("/since", "must be a revision (a non-negative integer), such as a list's "+HeaderResourceVersion)
	}
	return n, true, nil
}

// publishedRevision is the store's published revision (the relay cursor):
// every event up to it is in the stream. The watch hub needs it only when
// every event in the stream has expired.
func (s *Service) publishedRevision(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.store.ListResources(ctx, &storev1.ListResourcesRequest{Limit: 1})
	if err != nil {
		return 0, backendErr(err)
	}
	return resp.GetResourceVersion(), nil
}
