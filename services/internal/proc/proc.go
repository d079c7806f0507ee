// Package proc holds what every no8s binary does the same way: a logger,
// a context cancelled by SIGINT/SIGTERM, and environment defaults for flags.
package proc

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/no8s/no8s/libs/sdk/logging"
	"github.com/no8s/no8s/libs/sdk/profiling"
)

// Logger returns the process logger (package logging: NO8S_LOG_FORMAT,
// NO8S_LOG_LEVEL) carrying service=service.
func Logger(service string) *slog.Logger {
	return BaseLogger().With("service", service)
}

// BaseLogger returns the process logger without attributes. A bad setting is
// reported on stderr and the default (text, info) used.
func BaseLogger() *slog.Logger {
	log, err := logging.New(os.Stderr, logging.FromEnv(os.Getenv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "no8s: %v; logging text at info\n", err)
		log, _ = logging.New(os.Stderr, logging.Options{})
	}
	return log
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

// ProfileListenFlag defines --pprof-listen ($NO8S_PPROF_LISTEN): a loopback
// address for the runtime profiles (package profiling); "off", the default,
// serves none.
func ProfileListenFlag(fs *flag.FlagSet) *string {
	return fs.String("pprof-listen", Env(profiling.EnvListen, profiling.Off), `loopback address of the runtime profiles at /debug/pprof/ ($NO8S_PPROF_LISTEN; "off": none)`)
}

// HealthListenFlag defines --health-listen ($NO8S_HEALTH_LISTEN): the
// address of a process's /healthz and /readyz (package health), "off" for
// none.
func HealthListenFlag(fs *flag.FlagSet, def string) *string {
	return fs.String("health-listen", Env("NO8S_HEALTH_LISTEN", def), `address of the /healthz and /readyz probes ($NO8S_HEALTH_LISTEN; "off": none)`)
}
