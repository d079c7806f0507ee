package tenant

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// tenantMetrics are the tenant reconciler's own series. kind is the
// child's resource type name (bounded by the types registered), never the
// child's name.
type tenantMetrics struct {
	duration *prometheus.HistogramVec
	applies  *prometheus.CounterVec
	children sync.Map // [3]string → prometheus.Counter
}

func newTenantMetrics(reg prometheus.Registerer) *tenantMetrics {
	if reg == nil {
		return nil
	}
	m := &tenantMetrics{
		duration: metrics.MustVec(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "tenant",
			Name: "reconcile_duration_seconds", Help: "Duration of a Tenant's children step by result: ready (every child ready), waiting (a child not ready yet), degraded (a child failed by policy) or error.",
			Buckets: metrics.LongBuckets()}, []string{"result"})),
		applies: metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace,
			Name: "apply_attempts_total", Help: "Writes of Tenant children by kind (the child's type), result (created, updated, taken_over, conflict, error) and conflict policy (Stuck, Force)."},
			[]string{"kind", "result", "conflict_policy"})),
	}
	for _, r := range []string{"ready", "waiting", "degraded", "error"} {
		m.duration.WithLabelValues(r)
	}
	return m
}

// result is the apply result an action names.
func (a action) result() string {
	switch a {
	case actCreate:
		return "created"
	case actTakeOver:
		return "taken_over"
	}
	return "updated"
}

func (m *tenantMetrics) applied(kind, result, policy string) {
	if m == nil {
		return
	}
	if policy == "" {
		policy = tenancy.ConflictStuck
	}
	k := [3]string{kind, result, policy}
	c, ok := m.children.Load(k)
	if !ok {
		c, _ = m.children.LoadOrStore(k, m.applies.WithLabelValues(kind, result, policy))
	}
	c.(prometheus.Counter).Inc()
}

// timedDo is do, timed by its result.
func (r *reconciler) timedDo(ctx context.Context, req *sdk.Request[tenancy.TenantSpec]) (sdk.Result, error) {
	start := time.Now()
	res, err := r.do(ctx, req)
	if r.m != nil {
		result := "ready"
		switch {
		case err != nil && sdk.IsDegraded(err):
			result = "degraded"
		case err != nil:
			result = "error"
		case !res.IsZero():
			result = "waiting"
		}
		r.m.duration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	}
	return res, err
}
