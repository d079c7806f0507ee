package tracing

// The server side of a traced call, gRPC or HTTP: one span per call or
// request, continuing the caller's trace, with the few attributes an
// operator reads (the method, the route, the outcome). otelgrpc's stats
// handler and otelhttp's handler record the same span with a dozen
// semantic-convention attributes, message events and metrics each; on a
// create, which crosses three servers, that bookkeeping cost more than the
// spans themselves (docs/design/performance.md, "Traces").

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ServerScope is the instrumentation scope of the server spans.
const ServerScope = "github.com/no8s/no8s/libs/platform/tracing/server"

// metadataCarrier reads and writes W3C trace context in gRPC metadata.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// startCall starts the server span of a gRPC call whose metadata carries
// a traceparent, as the child of the caller's span; ok is false for a
// call outside any trace, which gets none: the services' background calls
// (the scheduler's relist, lease renewals, registry renewals) then start
// no trace of their own, and a change is one trace from its request.
func (t *Tracing) startCall(ctx context.Context, method string) (_ context.Context, _ trace.Span, ok bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(HeaderTraceparent)) == 0 {
		return ctx, nil, false
	}
	ctx = t.propagator.Extract(ctx, metadataCarrier(md))
	name := strings.TrimPrefix(method, "/")
	service, rpc, _ := strings.Cut(name, "/")
	ctx, span := t.provider.Tracer(ServerScope).Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.service", service), attribute.String("rpc.method", rpc)))
	return ctx, span, true
}

// endCall ends a call's span with its status code; the codes that say the
// server failed (not the caller) mark the span as an error, as the
// OpenTelemetry conventions for gRPC servers do.
func endCall(span trace.Span, err error) {
	st := status.Convert(err)
	span.SetAttributes(attribute.Int64("rpc.grpc.status_code", int64(st.Code())))
	switch st.Code() {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		span.SetStatus(otelcodes.Error, st.Message())
	}
	span.End()
}

// serverUnary is the unary interceptor of GRPCServerOptions.
func (t *Tracing) serverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, span, ok := t.startCall(ctx, info.FullMethod)
	if !ok {
		return handler(ctx, req)
	}
	resp, err := handler(ctx, req)
	endCall(span, err)
	return resp, err
}

// serverStream is the stream interceptor of GRPCServerOptions.
func (t *Tracing) serverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, span, ok := t.startCall(ss.Context(), info.FullMethod)
	if !ok {
		return handler(srv, ss)
	}
	err := handler(srv, tracedStream{ServerStream: ss, ctx: ctx})
	endCall(span, err)
	return err
}

// tracedStream is a server stream whose context carries the call's span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tracedStream) Context() context.Context { return s.ctx }

// serveHTTP is HTTPHandler's middleware: a span for each request named
// after its route pattern (or its method), continuing the trace of a
// request that carries traceparent, with the method, the path and the
// response's status.
func (t *Tracing) serveHTTP(h http.Handler, operation string) http.Handler {
	tracer := t.provider.Tracer(ServerScope)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := t.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		name := r.Pattern
		if name == "" {
			name = r.Method
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("server.name", operation), attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
			if sw.status >= 500 {
				span.SetStatus(otelcodes.Error, http.StatusText(sw.status))
			}
			span.End()
		}()
		h.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// statusWriter records the status a handler answers with; Flush and
// Unwrap keep streaming responses (server-sent events) and
// http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered, when the underlying writer can.
func (w *statusWriter) Flush() {
	w.wroteHeader = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is the underlying writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
