// Package tracing sends a process's spans to an OpenTelemetry collector by
// OTLP, configured only by the standard OTEL_* environment variables:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
//	    where to send; tracing is off when neither is set
//	OTEL_EXPORTER_OTLP_PROTOCOL (or _TRACES_PROTOCOL)
//	    http/protobuf (the default) or grpc
//	OTEL_TRACES_EXPORTER=none
//	    off, whatever the endpoint
//	OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER,
//	OTEL_TRACES_SAMPLER_ARG, OTEL_EXPORTER_OTLP_HEADERS, ...
//	    as the OpenTelemetry specification says
//
// Off, a process installs no instrumentation at all (Tracing.Enabled is
// false and the options below are empty): tracing costs nothing unless
// asked for. On, the context crosses processes as W3C trace context
// (traceparent, tracestate): in gRPC metadata (GRPCServerOptions,
// GRPCDialOptions) and in HTTP headers (HTTPHandler). LogHandler puts the
// trace and span ids on every log line written inside a span.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
)

// The environment variables that decide whether tracing is on and how
// spans are sent (the exporters read the others themselves).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
)

// The protocols an exporter speaks.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Tracing is a process's tracer provider: the OTLP pipeline when on, a
// no-op otherwise.
type Tracing struct {
	provider   trace.TracerProvider
	sdk        *sdktrace.TracerProvider
	propagator propagation.TextMapPropagator
}

// Off is tracing turned off: no spans, no instrumentation.
func Off() *Tracing {
	return &Tracing{provider: noop.NewTracerProvider(), propagator: propagation.TraceContext{}}
}

// Settings are what the environment says of tracing.
type Settings struct {
	// Endpoint is the collector's address ("" : tracing off).
	Endpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
}

// FromEnv reads Settings from getenv: off (Endpoint "") when no endpoint
// is set or OTEL_TRACES_EXPORTER is "none"; an error for an exporter or a
// protocol this process cannot speak.
func FromEnv(getenv func(string) string) (Settings, error) {
	switch exp := strings.TrimSpace(getenv(EnvTracesExporter)); exp {
	case "", "otlp":
	case "none":
		return Settings{}, nil
	default:
		return Settings{}, fmt.Errorf("%s=%q: otlp or none", EnvTracesExporter, exp)
	}
	s := Settings{Endpoint: firstSet(getenv, EnvTracesEndpoint, EnvEndpoint)}
	if s.Endpoint == "" {
		return Settings{}, nil
	}
	s.Protocol = firstSet(getenv, EnvTracesProtocol, EnvProtocol)
	switch s.Protocol {
	case "":
		s.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return Settings{}, fmt.Errorf("%s=%q: %s or %s", EnvProtocol, s.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	return s, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// Start sets up tracing for the process named service (the default of
// OTEL_SERVICE_NAME) as the environment says (FromEnv): Off when it says
// nothing. Call Shutdown when the process stops, to send what is buffered.
func Start(ctx context.Context, service string, log *slog.Logger) (*Tracing, error) {
	s, err := FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if s.Endpoint == "" {
		return Off(), nil
	}
	var exp sdktrace.SpanExporter
	if s.Protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter (%s): %w", s.Protocol, err)
	}
	// The environment's attributes (OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES) come last, so that they win.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID(),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The sampler is the SDK's default, parent-based always-on, unless
	// OTEL_TRACES_SAMPLER says otherwise (the SDK reads it).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("tracing on: spans go to the OTLP collector", "endpoint", s.Endpoint, "protocol", s.Protocol)
	return &Tracing{provider: tp, sdk: tp,
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}, nil
}

// Enabled reports whether spans are recorded and sent; false for a nil
// Tracing, which every method below takes as off.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Provider is the tracer provider: a no-op one when off.
func (t *Tracing) Provider() trace.TracerProvider {
	if !t.Enabled() {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Tracer returns the tracer of the named component: a no-op one when off.
func (t *Tracing) Tracer(name string) trace.Tracer { return t.Provider().Tracer(name) }

// Shutdown sends the spans still buffered and stops the exporter, waiting
// at most 5 s.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// GRPCServerOptions are a gRPC server's options for tracing: a span for
// each call that carries a caller's trace, continuing it (a call from an
// untraced caller starts none). None when off.
func (t *Tracing) GRPCServerOptions() []grpc.ServerOption {
	if !t.Enabled() {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(insideTrace{server: true, Handler: otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.provider), otelgrpc.WithPropagators(t.propagator))})}
}

// GRPCDialOptions are a gRPC client's options for tracing: a span for each
// call made inside a span, its context sent in the call's metadata (a call
// made outside any starts none). None when off.
func (t *Tracing) GRPCDialOptions() []grpc.DialOption {
	if !t.Enabled() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(insideTrace{Handler: otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(t.provider), otelgrpc.WithPropagators(t.propagator))})}
}

// HTTPHandler wraps h, the handler of the server named operation, with a
// span for each request, continuing the trace of a request that carries
// traceparent. h itself when off.
func (t *Tracing) HTTPHandler(h http.Handler, operation string) http.Handler {
	if !t.Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, operation,
		otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.Method
		}))
}

// HTTPTransport wraps rt (http.DefaultTransport when nil), a client's
// transport, so that each request is a span whose context the request's
// traceparent header carries. rt itself when off.
func (t *Tracing) HTTPTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if !t.Enabled() {
		return rt
	}
	return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator))
}
