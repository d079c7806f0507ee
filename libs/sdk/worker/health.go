package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/no8s/no8s/libs/platform/health"
)

// Handler serves the worker's probes (package health) for the binary to
// mount:
//
//	GET /healthz  200 while the worker runs (liveness), 503 once Run returned
//	GET /readyz   200 while NATS answers, the store's worker address
//	              answers and serves, and the worker is registered,
//	              consuming and not draining, else 503 naming what failed:
//	              "nats" (naming the server), "store" (naming the address: "store worker
//	              address 127.0.0.1:7003 unreachable: …") or "worker"
//	              (with the reason: not started, waiting for the store,
//	              draining, registry heartbeat failing, type taken)
//
// The store's worker address is checked every second (WithLinkCheck); while
// it does not answer the worker takes no work and stops refreshing its
// registration (it lapses after the registry TTL), and it logs one WARN when it becomes unreachable and one
// INFO when it answers again (DEBUG for the checks in between).
//
// Both answer a small JSON document with the reconciler, the replica, the
// types and the last registry heartbeat.
func (w *Worker) Handler() http.Handler { return health.Handler(w.Probes()) }

// Probes returns the worker's probe configuration, for a binary that
// serves more checks beside the worker's.
func (w *Worker) Probes() health.Config {
	natsCheck := health.NATS(w.cfg.NATS)
	return health.Config{
		Live: []health.Check{{Name: "worker", Func: func(context.Context) error {
			if w.stopped.Load() {
				return errors.New("stopped")
			}
			return nil
		}}},
		Ready: []health.Check{{Name: natsCheck.Name, Func: func(ctx context.Context) error {
			if err := natsCheck.Func(ctx); err != nil {
				return fmt.Errorf("%s: %w", natsServers(w.cfg.NATS), err) // the address it tries
			}
			return nil
		}}, {Name: "store", Func: func(context.Context) error {
			err, _ := w.link.readiness()
			return err
		}}, {Name: "worker", Func: func(context.Context) error {
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
			doc := map[string]any{"reconciler": w.name, "replica": w.replica, "types": w.cfg.Types, "store_addr": w.link.addr}
			if reg := w.reg.Load(); reg != nil && !reg.LastRefresh().IsZero() {
				doc["last_heartbeat"] = reg.LastRefresh().UTC().Format(time.RFC3339Nano)
			}
			return doc
		},
	}
}
