package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The attributes LogHandler adds.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler returns h adding, to every record logged with a context that
// holds a span, its trace_id and span_id: in text and JSON alike, so that
// a log line leads to its trace. Records without one pass unchanged.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}

// WithSpan returns log carrying the trace_id and span_id of ctx's span on
// every line, as LogHandler adds them to lines logged with ctx: for a
// logger handed to code that logs without a context (the SDK engine's
// attempt logger). log itself when ctx holds no span.
func WithSpan(ctx context.Context, log *slog.Logger) *slog.Logger {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return log
	}
	return log.With(LogTraceID, sc.TraceID().String(), LogSpanID, sc.SpanID().String())
}
