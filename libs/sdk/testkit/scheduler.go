package testkit

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/scheduler"
)

// Scheduler returns the in-process scheduler (nil with WithoutScheduler).
func (e *Env) Scheduler() *scheduler.Service { return e.sched }

// startScheduler runs one scheduler in-process, tuned for tests: a short
// leadership lease, a fast registry poll, and an item lease equal to the
// workers' lease.
func (e *Env) startScheduler(context.Context) error {
	js, err := jetstream.New(e.NATS)
	if err != nil {
		return err
	}
	cfg := scheduler.DefaultConfig()
	cfg.Holder = "testkit"
	cfg.Lease = 3 * time.Second
	cfg.LivenessPoll = 200 * time.Millisecond
	cfg.ItemLease = e.opts.lease
	cfg.RetryDelay = 200 * time.Millisecond
	cfg.Stream.Memory = true
	svc, err := scheduler.New(cfg, e.Reconcile, js, e.Log.With("service", "scheduler"))
	if err != nil {
		return err
	}
	e.sched = svc
	e.serve(func(ctx context.Context) error {
		err := svc.Run(ctx)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	})
	return nil
}
