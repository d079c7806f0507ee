// Package profiling serves Go's runtime profiles (net/http/pprof) for a
// no8s process: on a listener of its own, never on a public router, off by
// default, and only on a loopback address, so that a profile (which shows
// code paths and can stall the process while it is taken) is reachable from
// the machine itself alone. Reach it from elsewhere through an SSH tunnel or
// kubectl port-forward.
package profiling

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/no8s/no8s/libs/platform/health"
)

// Off is the address that serves nothing (the default).
const Off = "off"

// EnvListen names the variable that sets the profiling address of an SDK
// worker; services take the --pprof-listen flag, which defaults to it.
const EnvListen = "NO8S_PPROF_LISTEN"

// Handler is the pprof index, profiles and traces under /debug/pprof/.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Serve serves Handler on addr until ctx ends or stop is called; addr Off
// (or empty) serves nothing. An address whose host is not a loopback
// address (127.0.0.0/8, ::1, localhost) is refused.
func Serve(ctx context.Context, addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" || addr == Off {
		return func() {}, nil
	}
	if err := CheckLoopback(addr); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("profiling listener on %s: %w", addr, err)
	}
	if log != nil {
		log.Info("profiles serving", "addr", lis.Addr().String(), "path", "/debug/pprof/")
	}
	return health.ServeListener(ctx, lis, Handler(), nil), nil
}

// CheckLoopback refuses an address whose host is not a loopback address.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("profiling address %q: %w", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("profiling address %q: profiles are served on a loopback address only (127.0.0.1:PORT or [::1]:PORT)", addr)
}
