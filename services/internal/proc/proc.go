// Package proc holds what every no8s binary does the same way: a logger,
// a context cancelled by SIGINT/SIGTERM, and environment defaults for flags.
package proc

import (
	"context"
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
