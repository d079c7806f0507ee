package testkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiclient "github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"
)

// Running is a worker started by RunReconciler.
type Running struct {
	Worker *worker.Worker
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Stop stops the worker gracefully (as SIGTERM does) and waits for it.
func (r *Running) Stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// Done is closed when the worker has stopped.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err is Run's error once Done is closed.
func (r *Running) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// RunReconciler runs rec with the real worker runtime in this process,
// serving types, and waits until it is registered (so that resources of its
// types can be created). It stops when the test ends.
func (e *Env) RunReconciler(t testing.TB, rec worker.Reconciler, types ...sdk.TypeRef) *Running {
	t.Helper()
	return e.RunWorker(t, rec, types)
}

// RunWorker is RunReconciler with worker options (after the test kit's
// defaults: the Env's lease, 2 s shutdown grace, the Env's logger).
func (e *Env) RunWorker(t testing.TB, rec worker.Reconciler, types []sdk.TypeRef, opts ...worker.Option) *Running {
	t.Helper()
	r, err := e.StartWorker(rec, types, opts...)
	if err != nil {
		t.Fatalf("start reconciler %s: %v", rec.Name(), err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// reconcilerAPI is the REST API client of the attempts of the reconciler
// called name (Request.API), built as a deployed worker builds it
// (worker.NewAPIClient): on the gateway's service listener as that
// reconciler, with its credentials in dir; with identities off, on the API
// with the administrator's token.
func (e *Env) reconcilerAPI(name, dir string) (*apiclient.Client, error) {
	if dir == "" || e.serviceURL == "" {
		return e.API, nil
	}
	creds, err := identity.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("reconciler %s: %w", name, err)
	}
	api, err := worker.NewAPIClient(e.serviceURL, "", creds, name)
	if err != nil {
		return nil, fmt.Errorf("reconciler %s: %w", name, err)
	}
	return api, nil
}

// StartWorker starts a worker and waits until it is ready or has failed; the
// caller stops it.
func (e *Env) StartWorker(rec worker.Reconciler, types []sdk.TypeRef, opts ...worker.Option) (*Running, error) {
	all := append([]worker.Option{
		worker.WithLease(e.opts.lease), worker.WithShutdownGrace(2*time.Second, 2*time.Second),
		worker.WithLogger(e.Log.With("reconciler", rec.Name())),
	}, opts...)
	// The worker reaches the store as its reconciler, with exactly its
	// types, as a deployed one does with NO8S_IDENTITY_DIR.
	dir, err := e.reconcilerIdentity(rec.Name(), types)
	if err != nil {
		return nil, err
	}
	api, err := e.reconcilerAPI(rec.Name(), dir)
	if err != nil {
		return nil, err
	}
	all = append([]worker.Option{worker.WithAPI(api)}, all...)
	conn, err := DialAs(e.workerAddr, dir)
	if err != nil {
		return nil, err
	}
	w, err := worker.New(rec, worker.Config{Types: types, NATS: e.NATS, Store: conn}, all...)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{Worker: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer conn.Close()
		r.err = w.Run(ctx)
	}()
	deadline := time.After(10 * time.Second)
	for !w.Ready() {
		select {
		case <-r.done:
			cancel()
			return nil, r.err
		case <-deadline:
			cancel()
			<-r.done
			return nil, context.DeadlineExceeded
		case <-time.After(5 * time.Millisecond):
		}
	}
	e.onStop(func() { _ = r.Stop() })
	return r, nil
}
