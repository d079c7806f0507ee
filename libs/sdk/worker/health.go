package worker

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/no8s/no8s/libs/sdk/health"
)

// Handler serves the worker's probes (package health) for the binary to
// mount:
//
//	GET /healthz  200 while the worker runs (liveness), 503 once Run returned
//	GET /readyz   200 while NATS answers and the worker is registered,
//	              consuming and not draining, else 503 naming what failed:
//	              "nats" or "worker" (with the reason: not started,
//	              draining, registry heartbeat failing, type taken)
//
// Both answer a small JSON document with the reconciler, the replica, the
// types and the last registry heartbeat.
func (w *Worker) Handler() http.Handler { return health.Handler(w.Probes()) }

// Probes returns the worker's probe configuration, for a binary that
// serves more checks beside the worker's.
func (w *Worker) Probes() health.Config {
	return health.Config{
		Live: []health.Check{{Name: "worker", Func: func(context.Context) error {
			if w.stopped.Load() {
				return errors.New("stopped")
			}
			return nil
		}}},
		Ready: []health.Check{health.NATS(w.cfg.NATS), {Name: "worker", Func: func(context.Context) error {
			if w.Ready() {
				return nil
			}
			reason, _ := w.notReady.Load().(string)
			if reason == "" {
				reason = "not ready"
			}
			return errors.New(reason)
		}}},
		Info: func() map[string]any {
			doc := map[string]any{"reconciler": w.name, "replica": w.replica, "types": w.cfg.Types}
			if reg := w.reg.Load(); reg != nil && !reg.LastRefresh().IsZero() {
				doc["last_heartbeat"] = reg.LastRefresh().UTC().Format(time.RFC3339Nano)
			}
			return doc
		},
	}
}
