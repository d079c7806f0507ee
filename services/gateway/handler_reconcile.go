package gateway

import (
	"context"
	"encoding/json"
	"math"
	"net/http"

	"github.com/no8s/no8s/proto/enumpb"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/client"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/reconcilers"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
)

// History page sizes.
const (
	defaultHistoryLimit = 50
	maxHistoryLimit     = 500
)

// historyDoc is one row of GET /api/v1/resources/{id}/history: the API's
// (libs/client).
type historyDoc = client.HistoryEntry

// reconcileClient returns the ReconcileService client, or 503 without one.
func (s *Service) reconcileClient() (reconcilev1.ReconcileServiceClient, error) {
	if s.cfg.Reconcile == nil {
		return nil, problem.New(problem.Unavailable, problem.CodeUnavailable, "reconciliation is not configured on this gateway")
	}
	return s.cfg.Reconcile, nil
}

// requestReconcile is POST /api/v1/resources/{id}/reconcile: a manual
// trigger, answered 202 with the resource.
func (s *Service) requestReconcile(c *echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	rc, err := s.reconcileClient()
	if err != nil {
		return err
	}
	resp, err := call(s, c, rc.RequestReconcile, &reconcilev1.RequestReconcileRequest{ResourceId: id})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, resourcepb.FromProto(resp.GetResource()))
}

// listHistory is GET /api/v1/resources/{id}/history?limit=&before=: newest
// first; page back with before = the last id seen.
func (s *Service) listHistory(c *echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	limit, given, err := queryInt(c, "limit", 1, maxHistoryLimit)
	if err != nil {
		return err
	}
	if !given {
		limit = defaultHistoryLimit
	}
	before, _, err := queryInt(c, "before", 1, math.MaxInt64)
	if err != nil {
		return err
	}
	rc, err := s.reconcileClient()
	if err != nil {
		return err
	}
	resp, err := call(s, c, rc.ListHistory, &reconcilev1.ListHistoryRequest{ResourceId: id, Limit: int32(limit), BeforeId: before})
	if err != nil {
		return err
	}
	out := make([]historyDoc, 0, len(resp.GetEntries()))
	for _, e := range resp.GetEntries() {
		d := historyDoc{
			ID: e.GetId(), ResourceID: e.GetResourceId(), Generation: e.GetGeneration(), Success: e.GetSuccess(), Phase: e.GetPhase(),
			ResourcesCreated: e.GetResourcesCreated(), ResourcesUpdated: e.GetResourcesUpdated(), ResourcesDeleted: e.GetResourcesDeleted(),
			ReconcileTime: e.GetReconcileTime().AsTime().UTC(), DurationMS: e.GetDurationMs(), LeaseEpoch: e.GetLeaseEpoch(),
			Holder: e.GetHolder(),
		}
		if m := e.GetErrorMessage(); m != "" {
			d.ErrorMessage = &m
		}
		if t := e.GetStartedAt(); t != nil {
			st := t.AsTime().UTC()
			d.StartedAt = &st
		}
		if r := e.GetReason(); r != reconcilev1.Reason_REASON_UNSPECIFIED {
			d.Reason = enumpb.ReasonName(r)
		}
		out = append(out, d)
	}
	return writeJSON(c, http.StatusOK, out)
}

// getOutputs is GET /api/v1/resources/{id}/outputs: {"outputs": {...}}.
func (s *Service) getOutputs(c *echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.getResourceByID(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]json.RawMessage{"outputs": orEmptyObject(r.GetOutputs())})
}

// listReconcilers is GET /api/v1/reconcilers: the live reconcilers and the
// types they serve, from the NO8S_RECONCILERS registry.
func (s *Service) listReconcilers(c *echo.Context) error {
	if s.cfg.JetStream == nil {
		return problem.New(problem.Unavailable, problem.CodeUnavailable, "the reconciler registry is not configured on this gateway")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), min(s.cfg.RequestTimeout, reconcilers.ReadTimeout))
	defer cancel()
	reg, err := reconcilers.Read(ctx, s.cfg.JetStream)
	if err != nil {
		return &problem.Error{Kind: problem.Unavailable, Code: problem.CodeUnavailable, Detail: err.Error()}
	}
	out := reg.Reconcilers
	if out == nil {
		out = []reconcilers.Reconciler{}
	}
	return writeJSON(c, http.StatusOK, out)
}

// policyBody is a reconcile_policy in a resource type write: every field is
// optional (absent: the default) and, when given, a positive integer.
type policyBody struct {
	ResyncSeconds      *int32 `json:"resync_seconds"`
	BackoffBaseSeconds *int32 `json:"backoff_base_seconds"`
	BackoffMaxSeconds  *int32 `json:"backoff_max_seconds"`
	TimeoutSeconds     *int32 `json:"timeout_seconds"`
}

// toProto checks the policy and converts it; nil stays nil.
func (p *policyBody) toProto() (*storev1.ReconcilePolicy, []problem.FieldError) {
	if p == nil {
		return nil, nil
	}
	var errs []problem.FieldError
	get := func(name string, v *int32) int32 {
		if v == nil {
			return 0
		}
		if *v <= 0 {
			errs = append(errs, problem.FieldError{Path: "/reconcile_policy/" + name, Message: "must be a positive integer"})
		}
		return *v
	}
	rp := resource.ReconcilePolicy{
		ResyncSeconds:      get("resync_seconds", p.ResyncSeconds),
		BackoffBaseSeconds: get("backoff_base_seconds", p.BackoffBaseSeconds),
		BackoffMaxSeconds:  get("backoff_max_seconds", p.BackoffMaxSeconds),
		TimeoutSeconds:     get("timeout_seconds", p.TimeoutSeconds),
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if errs := resource.ValidatePolicy(rp, "/reconcile_policy"); len(errs) > 0 {
		return nil, errs
	}
	return resourcepb.PolicyToProto(rp), nil
}
