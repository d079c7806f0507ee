package metrics_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/metrics"
)

// A process builds one registry in main, hands it to what records
// metrics, and serves it beside its probes.
func Example() {
	reg := metrics.NewRegistry()
	requests := metrics.NewHTTP(reg)
	requests.Start()
	requests.Done("/api/v1/widgets/:id", "GET", 200, 12*time.Millisecond)

	h := health.Handler(health.Config{Metrics: metrics.Handler(reg)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", health.MetricsPath, nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "no8s_http_requests_total{") {
			fmt.Println(line)
		}
	}
	// Output: no8s_http_requests_total{code="200",method="GET",route="/api/v1/widgets/:id"} 1
}
