package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/proto/enumpb"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/sdk/client"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

func storeErr(t *testing.T, code codes.Code, reason string) error {
	t.Helper()
	st := status.New(code, "refused")
	if reason != "" {
		var err error
		if st, err = st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "no8s.io"}); err != nil {
			t.Fatal(err)
		}
	}
	return st.Err()
}

func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		code   codes.Code
		reason string
		want   error
	}{
		{codes.Aborted, "stale_epoch", wire.ErrStaleEpoch},
		{codes.Aborted, "lease_held", wire.ErrLeaseHeld},
		{codes.FailedPrecondition, "stale_dispatch", wire.ErrStaleDispatch},
		{codes.NotFound, "not_found", wire.ErrNotFound},
		{codes.Aborted, "conflict", wire.ErrConflict},
		{codes.Unavailable, "", wire.ErrUnavailable},
		{codes.DeadlineExceeded, "", wire.ErrUnavailable},
	} {
		err := client.Wrap("op", storeErr(t, tc.code, tc.reason))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s/%s: %v does not match %v", tc.code, tc.reason, err, tc.want)
		}
		if st, ok := status.FromError(err); !ok || st.Code() != tc.code {
			t.Errorf("%s/%s: status lost: %v", tc.code, tc.reason, err)
		}
	}
	if err := client.Wrap("op", storeErr(t, codes.Canceled, "")); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if client.Wrap("op", nil) != nil {
		t.Error("nil error wrapped")
	}
	// A worker at the store's main address: the error says where to point it.
	if err := client.Wrap("op", storeErr(t, codes.Unimplemented, "")); !strings.Contains(err.Error(), "NO8S_STORE_ADDR") {
		t.Errorf("unimplemented: %v does not name NO8S_STORE_ADDR", err)
	}
}

func TestCompleteRequest(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lease := &client.Lease{ResourceID: 9, Epoch: 4, Holder: "widgets/r1", Reason: reconcilev1.Reason_REASON_RETRY}
	req := client.CompleteRequest(&wire.Completion{
		ResourceID: 9, Generation: 2, Outcome: lifecycle.OutcomeRequeue, RequeueAfter: 1500 * time.Millisecond,
		Message: "waiting", Conditions: []conditions.Condition{{Type: "Ready", Status: conditions.False}},
		Changes: wire.Changes{Created: 1}, StartedAt: start, Duration: 42 * time.Millisecond,
		RemoveAnnotations: []string{names.OperationAnnotation},
	}, lease)
	h := req.GetHistory()
	if req.GetLeaseEpoch() != 4 || req.GetOutcome() != reconcilev1.Outcome_OUTCOME_REQUEUE || req.GetRequeueAfterSeconds() != 2 ||
		req.GetGeneration() != 2 || len(req.GetConditions()) != 1 || req.GetRemoveAnnotations()[0] != names.OperationAnnotation {
		t.Fatalf("request %v", req)
	}
	if h.GetSuccess() || h.GetDurationMs() != 42 || h.GetResourcesCreated() != 1 || h.GetHolder() != "widgets/r1" ||
		h.GetReason() != reconcilev1.Reason_REASON_RETRY || !h.GetStartedAt().AsTime().Equal(start) {
		t.Fatalf("history %v", h)
	}
	if req.GetDegraded() || req.GetObserved() {
		t.Fatalf("a requeue sent degraded %v observed %v", req.GetDegraded(), req.GetObserved())
	}
	failed := client.CompleteRequest(&wire.Completion{ResourceID: 9, Generation: 2, Outcome: lifecycle.OutcomeError, Degraded: true, Observed: true}, lease)
	if !failed.GetDegraded() || !failed.GetObserved() {
		t.Fatalf("degraded and observed not sent: %v", failed)
	}
	if got := enumpb.ReasonName(reconcilev1.Reason_REASON_GENERATION); got != "generation" {
		t.Fatalf("reason %q", got)
	}
}

func TestPolicyDefaults(t *testing.T) {
	p := client.PolicyFromProto(&reconcilev1.ReconcilePolicy{TimeoutSeconds: 7})
	if p.Timeout != 7*time.Second || p.Resync != client.DefaultResync || p.BackoffBase != client.DefaultBackoffBase || p.BackoffMax != client.DefaultBackoffMax {
		t.Fatalf("%+v", p)
	}
}
