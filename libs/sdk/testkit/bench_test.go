package testkit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/testkit"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// BenchmarkNoopAttempts measures the worker runtime with the real store:
// one item per resource is queued first, then one worker (concurrency 64)
// drains them; each attempt is AcquireLease, the engine, CompleteReconcile
// and an ack.
//
//	go test -run '^$' -bench NoopAttempts -benchtime 2000x ./libs/sdk/testkit/
func BenchmarkNoopAttempts(b *testing.B) {
	env := testkit.Start(b, testkit.WithoutScheduler())
	env.CreateType(b, widget.Name, widget.Version, widgetSchema)
	engine := sdk.New("noop", sdk.Func[map[string]any](func(context.Context, *sdk.Request[map[string]any]) (sdk.Result, error) {
		return sdk.Result{}, nil
	}))
	// A worker creates the stream and consumer; stop it while items queue.
	first := env.RunWorker(b, engine, []sdk.TypeRef{widget})
	var all []*sdk.Resource
	for i := range b.N {
		all = append(all, env.CreateResource(b, widget, fmt.Sprintf("r%04d", i), map[string]any{}))
	}
	_ = first.Stop()
	for _, r := range all {
		env.Dispatch(b, r, reconcilev1.Reason_REASON_RESYNC)
	}
	b.ResetTimer()
	start := time.Now()
	run := env.RunWorker(b, engine, []sdk.TypeRef{widget}, worker.WithMaxConcurrency(64))
	for run.Worker.Stats().Acked.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "attempts/s")
}
