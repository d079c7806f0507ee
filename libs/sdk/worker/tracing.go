package worker

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
	"github.com/no8s/no8s/proto/enumpb"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// tracerName names the worker runtime's tracer.
const tracerName = "github.com/no8s/no8s/libs/sdk/worker"

// The worker's span names (docs/observability.md).
const (
	spanAttempt = "attempt"
	spanStep    = "step "   // + the step's name
	spanAction  = "action " // + the plugin's name
)

// startAttempt starts the attempt's span, a consumer span continuing the
// trace the work item's headers carry (the scheduler's dispatch span); ctx
// unchanged and a no-op span when tracing is off.
func (w *Worker) startAttempt(ctx context.Context, msg jetstream.Msg, wi *reconcilev1.WorkItem) (context.Context, trace.Span) {
	if !w.o.tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return w.o.tracing.Tracer(tracerName).Start(tracing.FromHeaders(ctx, msg.Headers()), spanAttempt,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", msg.Subject()),
			attribute.String("no8s.reconciler", w.name), attribute.Int64("no8s.resource_id", wi.GetResourceId()),
			attribute.String("no8s.resource_type", wi.GetResourceTypeName()+"/"+wi.GetResourceTypeVersion()),
			attribute.String("no8s.reason", enumpb.ReasonName(wi.GetReason())), attribute.String("no8s.dispatch_id", wi.GetDispatchId())))
}

// endAttempt records how the attempt ended on its span and ends it.
func endAttempt(span trace.Span, rep wire.Report) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("no8s.outcome", rep.Outcome.String()))
	if rep.Err != nil {
		span.SetStatus(codes.Error, rep.Err.Error())
	}
	span.End()
}

// stepHook is the engine's StartStep: the step's metrics and, with
// tracing on, its span. nil when neither is on.
func (w *Worker) stepHook() func(ctx context.Context, step, stage string) (context.Context, func(error)) {
	if w.metrics == nil && !w.o.tracing.Enabled() {
		return nil
	}
	tracer := w.o.tracing.Tracer(tracerName)
	return func(ctx context.Context, step, stage string) (context.Context, func(error)) {
		start := time.Now()
		var span trace.Span
		if w.o.tracing.Enabled() {
			ctx, span = tracer.Start(ctx, spanStep+step,
				trace.WithAttributes(attribute.String("no8s.step", step), attribute.String("no8s.step.stage", stage)))
		}
		return ctx, func(err error) {
			w.metrics.observeStep(step, stage, time.Since(start), err != nil)
			endSpan(span, err)
		}
	}
}

// actionHook is the engine's StartAction: with tracing on, a span per
// action plugin call; nil when off.
func (w *Worker) actionHook() func(ctx context.Context, plugin, operation string) (context.Context, func(error)) {
	if !w.o.tracing.Enabled() {
		return nil
	}
	tracer := w.o.tracing.Tracer(tracerName)
	return func(ctx context.Context, plugin, operation string) (context.Context, func(error)) {
		ctx, span := tracer.Start(ctx, spanAction+plugin,
			trace.WithAttributes(attribute.String("no8s.action", plugin), attribute.String("no8s.action.operation", operation)))
		return ctx, func(err error) { endSpan(span, err) }
	}
}

// endSpan ends span (nil: none), marking it failed with err.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
