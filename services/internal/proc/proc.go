// Package proc holds what every no8s binary does the same way: a logger,
// a context cancelled by SIGINT/SIGTERM, and environment defaults for flags.
package proc

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Logger returns a text logger on stderr at the level named by NO8S_LOG_LEVEL
// (debug, info, warn, error; default info).
func Logger(service string) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(Env("NO8S_LOG_LEVEL", "info"))); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("service", service)
}

// SignalContext returns a context cancelled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Env returns the environment variable name, or def when unset or empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// HealthListenFlag defines --health-listen ($NO8S_HEALTH_LISTEN): the
// address of a process's /healthz and /readyz (package health), "off" for
// none.
func HealthListenFlag(fs *flag.FlagSet, def string) *string {
	return fs.String("health-listen", Env("NO8S_HEALTH_LISTEN", def), `address of the /healthz and /readyz probes ($NO8S_HEALTH_LISTEN; "off": none)`)
}
