// Package otlp starts a process's traces as the standard OTEL_* environment
// says (tracing.FromEnv), exporting spans by OTLP over http/protobuf or
// gRPC with the OpenTelemetry exporters. It is a module of its own: the
// exporters' OTLP collector types pull in grpc-gateway, which the platform
// module, and so the SDK, keeps out of every reconciler's build. The
// services start their traces here; a reconciler built on the SDK passes
// the result to its worker:
//
//	tr, err := otlp.Start(ctx, "my-reconciler", log)
//	...
//	defer tr.Shutdown(ctx)
//	err = worker.RunMain(ctx, engine, types, os.Getenv, worker.WithTracing(tr))
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"

	"github.com/no8s/no8s/libs/platform/tracing"
)

// Start sets up tracing for the process named service (the default of
// OTEL_SERVICE_NAME) as the environment says (tracing.FromEnv): off when
// it says nothing. Call Shutdown when the process stops, to send what is
// buffered.
func Start(ctx context.Context, service string, log *slog.Logger) (*tracing.Tracing, error) {
	s, err := tracing.FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if s.Endpoint == "" {
		return tracing.Off(), nil
	}
	var exp sdktrace.SpanExporter
	if s.Protocol == tracing.ProtocolGRPC {
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
	return tracing.New(tp), nil
}
