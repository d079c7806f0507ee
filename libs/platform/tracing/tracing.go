// Package tracing is the one home of no8s's traces, for the services and
// for reconcilers built on the SDK: which OTEL_* environment turns them on
// (FromEnv), the process's Tracing (New, Off), and how the trace context
// crosses processes as W3C trace context (traceparent, tracestate): in
// gRPC metadata (GRPCServerOptions, GRPCDialOptions), HTTP headers
// (HTTPHandler, HTTPTransport, InjectHTTP), NATS message headers
// (InjectHeaders, FromHeaders) and records kept between processes (Encode,
// Decode: the outbox row's trace_context). LogHandler puts the trace and
// span ids on every log line written inside a span.
//
// The OTLP exporters live in package otlp, a module of its own (their
// OTLP collector types pull in grpc-gateway, which this module, and so the
// SDK that requires it, keeps out): otlp.Start builds a Tracing from the
// environment:
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
// false, a nil *Tracing is off, and the options below are empty): tracing
// costs nothing unless asked for.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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

// New returns the Tracing of provider, the process's tracer provider
// (package otlp builds it from the OTEL_* environment): spans recorded by
// it, context carried as W3C trace context and baggage. Off when provider
// is nil.
func New(provider *sdktrace.TracerProvider) *Tracing {
	if provider == nil {
		return Off()
	}
	return &Tracing{provider: provider, sdk: provider,
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
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
// untraced caller starts none), with the call's service, method and status
// code (server.go). None when off.
func (t *Tracing) GRPCServerOptions() []grpc.ServerOption {
	if !t.Enabled() {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(t.serverUnary), grpc.ChainStreamInterceptor(t.serverStream)}
}

// GRPCDialOptions are a gRPC client's options for tracing: a call made
// inside a span carries that span's context in its metadata (W3C
// traceparent and tracestate), so that the server's span of the call is
// its child; a call made outside any carries none. The caller records no
// span of its own: the server's span times the call, and a client span
// per call would add a span to every hop of every change (a third of a
// create's) for the time on the wire alone. None when off.
func (t *Tracing) GRPCDialOptions() []grpc.DialOption {
	if !t.Enabled() {
		return nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(propagateUnary), grpc.WithChainStreamInterceptor(propagateStream)}
}

// HTTPHandler wraps h, the handler of the server named operation, with a
// span for each request, continuing the trace of a request that carries
// traceparent, with its method, path and status (server.go). h itself
// when off.
func (t *Tracing) HTTPHandler(h http.Handler, operation string) http.Handler {
	if !t.Enabled() {
		return h
	}
	return t.serveHTTP(h, operation)
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
