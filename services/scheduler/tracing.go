package scheduler

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/scheduler/dispatch"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// tracerName names the scheduler's tracer.
const tracerName = "github.com/no8s/no8s/services/scheduler"

// spanDispatch is the name of the span of one work item's dispatch.
const spanDispatch = "dispatch"

// traced is what the scheduler remembers of a resource's traced changes,
// with tracing on only (docs/observability.md):
//
//   - last is the trace context of the newest event about the resource:
//     a dispatch that this change causes (generation drift, deletion, a
//     pending resource, the reconcile annotation) continues it, its
//     dispatch span a child of the relay's publish span;
//   - spec is that of the newest CREATED or MODIFIED event (a change
//     that may set the generation), and gen with genTrace the generation
//     last read from the store and the spec change seen before it: the
//     change that set the generation. A reconcile triggered by resync,
//     retry (backoff), requeue or a manual trigger starts a trace of its
//     own whose dispatch span links to genTrace.
//
// This lives in the leader's memory: a new leader links the reconciles of
// changes it did not see to nothing (they still get their own trace).
type traced struct {
	last, spec string
	gen        int64
	genTrace   string
}

// eventTrace is the trace context an event message carries ("" for none,
// or when this scheduler does not trace).
func (l *loop) eventTrace(h nats.Header) string {
	if !l.s.cfg.Tracing.Enabled() {
		return ""
	}
	return tracing.HeadersContext(h)
}

// noteEvent remembers ev's trace context.
func (l *loop) noteEvent(ev event) {
	if ev.trace == "" {
		return
	}
	t := l.traces[ev.id]
	t.last = ev.trace
	if ev.typ == eventstream.Created || ev.typ == eventstream.Modified {
		t.spec = ev.trace
	}
	l.traces[ev.id] = t
}

// noteGeneration takes the generation read for resource id: when it
// differs from the one last read, the spec change seen last set it.
func (l *loop) noteGeneration(id, gen int64) {
	t, ok := l.traces[id]
	if !ok || t.gen == gen || t.spec == "" {
		return
	}
	t.gen, t.genTrace = gen, t.spec
	l.traces[id] = t
}

// traceOf returns the parent of the dispatch span of resource id for
// reason (the change that caused it), or the span to link to when the
// reconcile starts a trace of its own.
func (l *loop) traceOf(id int64, reason trigger.Reason) (parent, link string) {
	t, ok := l.traces[id]
	if !ok {
		return "", ""
	}
	switch reason {
	case trigger.Generation, trigger.Deletion, trigger.Pending, trigger.Annotation:
		return t.last, ""
	default: // Resync, Retry, Requeue, Manual
		return "", t.genTrace
	}
}

// startDispatchSpans starts the dispatch span of each item (with tracing
// on) and sets the item's TraceContext to it, so that the work item's
// message carries it; the spans are returned in the order of items (nil
// when off).
func (l *loop) startDispatchSpans(ctx context.Context, jobs []job, idx []int, items []dispatch.Item) []trace.Span {
	if !l.s.cfg.Tracing.Enabled() {
		return nil
	}
	tracer := l.s.cfg.Tracing.Tracer(tracerName)
	spans := make([]trace.Span, len(items))
	for k, it := range items {
		j := jobs[idx[k]]
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.String("messaging.system", "nats"),
				attribute.String("messaging.destination.name", it.Subject()),
				attribute.Int64("no8s.resource_id", it.ResourceID), attribute.String("no8s.reason", it.Reason.String()),
				attribute.String("no8s.dispatch_id", it.DispatchID), attribute.Int64("no8s.scheduler_epoch", it.SchedulerEpoch))}
		parent := ctx
		if j.traceParent != "" {
			parent = tracing.Decode(ctx, j.traceParent)
		} else {
			opts = append(opts, trace.WithNewRoot())
			if sc := trace.SpanContextFromContext(tracing.Decode(ctx, j.traceLink)); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
					Attributes: []attribute.KeyValue{attribute.String("no8s.link", "generation")}}))
			}
		}
		sctx, span := tracer.Start(parent, spanDispatch, opts...)
		items[k].TraceContext = tracing.Encode(sctx)
		spans[k] = span
	}
	return spans
}

// endDispatchSpan ends a dispatch span with the publication's outcome and
// logs it with the span's context.
func (l *loop) endDispatchSpan(ctx context.Context, span trace.Span, it dispatch.Item, seq uint64, err error) {
	if span == nil {
		return
	}
	ctx = trace.ContextWithSpan(ctx, span)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		l.log.WarnContext(ctx, "work item not published", "resource", it.ResourceID, "dispatch_id", it.DispatchID, "error", err)
	} else {
		span.SetAttributes(attribute.Int64("messaging.nats.stream.sequence", int64(seq)))
		l.log.DebugContext(ctx, "work item published", "resource", it.ResourceID, "reason", it.Reason.String(), "dispatch_id", it.DispatchID, "sequence", seq)
	}
	span.End()
}
