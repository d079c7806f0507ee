package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/platform/metrics"
)

// TestRecordersLintCleanAndCount: the HTTP and gRPC recorders count by
// bounded labels, the registry carries the runtime collectors, and what
// is served passes promlint.
func TestRecordersLintCleanAndCount(t *testing.T) {
	reg := metrics.NewRegistry()
	h := metrics.NewHTTP(reg)
	for range 3 {
		h.Start()
		h.Done("/api/v1/resources/:id", "GET", 200, 3*time.Millisecond)
	}
	h.Start()
	h.Done("", "BREW", 404, time.Millisecond)

	srv := metrics.NewGRPCServer(reg)
	cli := metrics.NewGRPCClient(reg)
	// A second recorder of the same side (two servers in one process)
	// shares the series instead of failing to register.
	_ = metrics.NewGRPCServer(reg)
	info := &grpc.UnaryServerInfo{FullMethod: "/no8s.store.v1.StoreService/GetResource"}
	_, _ = srv.UnaryServer()(t.Context(), nil, info, func(context.Context, any) (any, error) { return nil, nil })
	_, _ = srv.UnaryServer()(t.Context(), nil, info, func(context.Context, any) (any, error) {
		return nil, status.Error(codes.NotFound, "no")
	})
	err := cli.UnaryClient()(t.Context(), "/no8s.store.v1.StoreService/GetResource", nil, nil, nil,
		func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			return errors.New("plain")
		})
	if err == nil {
		t.Fatal("the interceptor swallowed the error")
	}

	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`no8s_http_requests_total{code="200",method="GET",route="/api/v1/resources/:id"} 3`,
		`no8s_http_requests_total{code="404",method="other",route="unmatched"} 1`,
		`no8s_http_requests_in_flight 0`,
		`no8s_grpc_server_handled_total{grpc_code="OK",grpc_method="GetResource",grpc_service="no8s.store.v1.StoreService"} 1`,
		`no8s_grpc_server_handled_total{grpc_code="NotFound",grpc_method="GetResource",grpc_service="no8s.store.v1.StoreService"} 1`,
		`no8s_grpc_client_handled_total{grpc_code="Unknown",grpc_method="GetResource",grpc_service="no8s.store.v1.StoreService"} 1`,
		"go_goroutines ", "process_cpu_seconds_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
