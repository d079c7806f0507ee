// Package health is the one home of the probes every no8s process serves,
// the services and the reconciler workers alike:
//
//	GET /healthz  200 {"status":"ok"} while the process is alive (its own
//	              Live checks pass; none by default), else 503
//	GET /readyz   200 {"status":"ok"} when every dependency answers, else 503
//	              {"status":"unavailable","failed":["nats"],"errors":{"nats":"…"},"detail":"nats: …"}
//	GET /metrics  the process's Prometheus metrics, when Config.Metrics is set
//
// A check is a named function; the checks of one probe run concurrently on
// every request, each bounded by Config.Timeout (2 s by default), so a probe
// reflects a failure or a recovery within that bound. Names are the
// dependency's: "nats", "store", "admission", "postgres", or a part of the
// process ("registry" for a worker's registration).
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Paths of the probes.
const (
	LivePath    = "/healthz"
	ReadyPath   = "/readyz"
	MetricsPath = "/metrics"
)

// Off is the listen address that disables a probe listener.
const Off = "off"

// DefaultTimeout bounds each check.
const DefaultTimeout = 2 * time.Second

// Check is one named dependency or part of the process.
type Check struct {
	// Name names what is checked, as reported in "failed".
	Name string
	// Func returns nil when the dependency is usable.
	Func func(ctx context.Context) error
}

// Config is what the probes check.
type Config struct {
	// Live are the liveness checks (usually none: a process that answers
	// is alive).
	Live []Check
	// Ready are the readiness checks.
	Ready []Check
	// Info adds fields to both answers (names, versions, last heartbeat).
	Info func() map[string]any
	// Timeout bounds each check (default DefaultTimeout).
	Timeout time.Duration
	// Metrics, when set, is served on MetricsPath beside the probes (the
	// process's Prometheus metrics, package metrics).
	Metrics http.Handler
}

// Report is the outcome of one probe.
type Report struct {
	// Status is "ok" or "unavailable".
	Status string `json:"status"`
	// Failed names the failed checks, sorted.
	Failed []string `json:"failed,omitempty"`
	// Errors holds each failed check's error.
	Errors map[string]string `json:"errors,omitempty"`
	// Detail is the errors in one line.
	Detail string `json:"detail,omitempty"`
}

// OK reports whether every check passed.
func (r Report) OK() bool { return len(r.Failed) == 0 }

// Run runs checks concurrently, each bounded by timeout (DefaultTimeout
// when not positive).
func Run(ctx context.Context, timeout time.Duration, checks []Check) Report {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = c.Func(cctx)
		})
	}
	wg.Wait()
	r := Report{Status: "ok"}
	var details []string
	for i, err := range errs {
		if err == nil {
			continue
		}
		if r.Errors == nil {
			r.Errors = map[string]string{}
		}
		r.Failed = append(r.Failed, checks[i].Name)
		r.Errors[checks[i].Name] = err.Error()
	}
	if len(r.Failed) > 0 {
		slices.Sort(r.Failed)
		for _, name := range r.Failed {
			details = append(details, name+": "+r.Errors[name])
		}
		r.Status, r.Detail = "unavailable", strings.Join(details, "; ")
	}
	return r
}

// Handler serves LivePath and ReadyPath.
func Handler(cfg Config) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+LivePath, ProbeHandler(cfg, cfg.Live))
	mux.Handle("GET "+ReadyPath, ProbeHandler(cfg, cfg.Ready))
	if cfg.Metrics != nil {
		mux.Handle("GET "+MetricsPath, cfg.Metrics)
	}
	return mux
}

// ProbeHandler answers one probe over checks, with cfg's timeout and info:
// for a service that mounts the probes on its own router.
func ProbeHandler(cfg Config, checks []Check) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		r := Run(req.Context(), cfg.Timeout, checks)
		doc := map[string]any{}
		if cfg.Info != nil {
			for k, v := range cfg.Info() {
				doc[k] = v
			}
		}
		doc["status"] = r.Status
		if !r.OK() {
			doc["failed"], doc["errors"], doc["detail"] = r.Failed, r.Errors, r.Detail
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("Cache-Control", "no-store")
		if !r.OK() {
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(rw).Encode(doc)
	})
}

// NATS checks a connection to a JetStream server: connected, and JetStream
// answering (a server that has just restarted answers only once its
// JetStream is up).
func NATS(nc *nats.Conn) Check {
	return Check{Name: "nats", Func: func(ctx context.Context) error {
		if nc == nil {
			return errors.New("no connection")
		}
		if !nc.IsConnected() {
			return fmt.Errorf("not connected (%s)", strings.ToLower(nc.Status().String()))
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		if _, err := js.AccountInfo(ctx); err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		return nil
	}}
}

// GRPC checks a no8s gRPC service through its health service (overall
// status).
func GRPC(name string, conn grpc.ClientConnInterface) Check {
	return Check{Name: name, Func: func(ctx context.Context) error {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return fmt.Errorf("health check: %w", err)
		}
		if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health status %s", s)
		}
		return nil
	}}
}

// Serve serves h on addr in its own goroutine until ctx ends or stop is
// called (stop waits for that goroutine); addr Off (or empty) serves
// nothing. It returns an error only when addr cannot be listened on;
// serving errors are logged.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	if addr == "" || addr == Off {
		return func() {}, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health listener on %s: %w", addr, err)
	}
	return ServeListener(ctx, lis, h, log), nil
}

// ServeListener serves h on lis as Serve does, for a caller that chose the
// listener itself.
func ServeListener(ctx context.Context, lis net.Listener, h http.Handler, log *slog.Logger) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error("health listener", "error", err)
		}
	}()
	if log != nil {
		log.Info("probes serving", "addr", lis.Addr().String(), "paths", LivePath+","+ReadyPath)
	}
	stopped := context.AfterFunc(ctx, func() { _ = srv.Close() })
	return func() {
		stopped()
		_ = srv.Close()
		<-done
	}
}
