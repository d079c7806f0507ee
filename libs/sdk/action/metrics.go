package action

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
)

// Instrumented returns p counting its calls on reg as
// no8s_action_calls_total{plugin, operation, outcome}: operation apply or
// destroy; outcome done, in_progress, error or terminal. A nil reg returns
// p as it is.
func Instrumented(p Plugin, reg prometheus.Registerer) Plugin {
	if reg == nil {
		return p
	}
	v := metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "action",
		Name: "calls_total", Help: "Action plugin calls by plugin, operation (apply, destroy) and outcome (done, in_progress, error, terminal)."},
		[]string{"plugin", "operation", "outcome"}))
	ip := &instrumented{Plugin: p, counts: map[[2]string]prometheus.Counter{}}
	for _, op := range []string{"apply", "destroy"} {
		for _, o := range []string{"done", "in_progress", "error", "terminal"} {
			ip.counts[[2]string{op, o}] = v.WithLabelValues(p.Name(), op, o)
		}
	}
	return ip
}

type instrumented struct {
	Plugin
	counts map[[2]string]prometheus.Counter // read-only once built
}

func (p *instrumented) count(op string, st Status, err error) {
	o := "in_progress"
	var te *TerminalError
	switch {
	case errors.As(err, &te):
		o = "terminal"
	case err != nil:
		o = "error"
	case st.Done:
		o = "done"
	}
	p.counts[[2]string{op, o}].Inc()
}

func (p *instrumented) Apply(ctx context.Context, t Task) (Status, error) {
	st, err := p.Plugin.Apply(ctx, t)
	p.count("apply", st, err)
	return st, err
}

func (p *instrumented) Destroy(ctx context.Context, t Task) (Status, error) {
	st, err := p.Plugin.Destroy(ctx, t)
	p.count("destroy", st, err)
	return st, err
}
