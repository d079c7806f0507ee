package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/health"
)

// Environment variables read by Main and RunMain.
const (
	// EnvNATSURL is the NATS server (default nats://127.0.0.1:4222).
	EnvNATSURL = "NATS_URL"
	// EnvStoreAddr is the store's gRPC address (default 127.0.0.1:7001).
	EnvStoreAddr = "NO8S_STORE_ADDR"
	// EnvHealthListen is the probe address (default :8081; "off" disables).
	EnvHealthListen = "NO8S_HEALTH_LISTEN"
	// EnvMaxConcurrency bounds concurrent attempts (default 8).
	EnvMaxConcurrency = "NO8S_MAX_CONCURRENCY"
	// EnvReplicaID names the replica (default host-pid-random).
	EnvReplicaID = "NO8S_REPLICA_ID"
	// EnvLogLevel is debug, info, warn or error (default info).
	EnvLogLevel = "NO8S_LOG_LEVEL"
)

// Main runs rec as a worker process configured from the environment, until
// SIGTERM or SIGINT, and exits: a reconciler binary's whole main is
//
//	func main() { worker.Main(engine, sdk.Type("Widget", "v1")) }
func Main(rec sdk.Reconciler, types ...sdk.TypeRef) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := RunMain(ctx, rec, types, os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", rec.Name(), err)
		stop()
		os.Exit(1)
	}
}

// RunMain is Main without the signals and the exit: it connects to NATS and
// the store as getenv says, serves the probes and runs the worker until ctx
// ends. opts come after the environment's.
func RunMain(ctx context.Context, rec sdk.Reconciler, types []sdk.TypeRef, getenv func(string) string, opts ...Option) error {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(env(EnvLogLevel, "info"))); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, EnvLogLevel, err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	all := []Option{WithLogger(log)}
	if v := getenv(EnvMaxConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%w: %s=%q is not a number", ErrInvalidConfig, EnvMaxConcurrency, v)
		}
		all = append(all, WithMaxConcurrency(n))
	}
	if v := getenv(EnvReplicaID); v != "" {
		all = append(all, WithReplicaID(v))
	}
	all = append(all, opts...)

	natsURL := env(EnvNATSURL, nats.DefaultURL)
	nc, err := nats.Connect(natsURL, nats.Name("no8s-reconciler-"+rec.Name()), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "error", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("connect to nats at %s: %w", natsURL, err)
	}
	defer nc.Close()
	storeAddr := env(EnvStoreAddr, "127.0.0.1:7001")
	conn, err := grpc.NewClient(storeAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("store at %s: %w", storeAddr, err)
	}
	defer conn.Close()

	w, err := New(rec, Config{Types: types, NATS: nc, Store: conn}, all...)
	if err != nil {
		return err
	}
	stopProbes, err := health.Serve(ctx, env(EnvHealthListen, ":8081"), w.Handler(), log)
	if err != nil {
		return err
	}
	defer stopProbes()
	return w.Run(ctx)
}
