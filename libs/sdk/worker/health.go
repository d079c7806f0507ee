package worker

import (
	"encoding/json"
	"net/http"
	"time"
)

// Handler serves the worker's probes for the binary to mount:
//
//	GET /healthz  200 while the worker runs (liveness), 503 once Run returned
//	GET /readyz   200 while registered, consuming and not draining, else 503
//	              with the reason
//
// Both answer a small JSON document.
func (w *Worker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		ok := !w.stopped.Load() && w.cfg.NATS != nil && !w.cfg.NATS.IsClosed()
		status := "ok"
		if !ok {
			status = "stopped"
		}
		writeProbe(rw, ok, map[string]any{"status": status, "reconciler": w.name, "replica": w.replica})
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		reason, _ := w.notReady.Load().(string)
		ok := w.Ready() && w.cfg.NATS.IsConnected()
		switch {
		case ok:
		case reason == "" && !w.cfg.NATS.IsConnected():
			reason = "nats disconnected"
		case reason == "":
			reason = "not ready"
		}
		doc := map[string]any{"status": "ready", "reconciler": w.name, "replica": w.replica, "types": w.cfg.Types}
		if !ok {
			doc["status"], doc["reason"] = "not ready", reason
		}
		if reg := w.reg.Load(); reg != nil && !reg.LastRefresh().IsZero() {
			doc["last_heartbeat"] = reg.LastRefresh().UTC().Format(time.RFC3339Nano)
		}
		writeProbe(rw, ok, doc)
	})
	return mux
}

func writeProbe(rw http.ResponseWriter, ok bool, doc map[string]any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("Cache-Control", "no-store")
	if !ok {
		rw.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(rw).Encode(doc)
}
