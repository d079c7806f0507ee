package main

import (
	"flag"
	"fmt"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/platform/tracing/otlp/tracingtest"
)

var otlpFlag = flag.Bool("otlp", false, "tracing on: every no8s process samples every trace and exports its spans by OTLP/HTTP to a receiver in this process")

// startOTLP starts the -otlp receiver and sets the OTEL_* environment of
// the no8s processes started after it; the returned function reports the
// spans received and stops the receiver. Without -otlp it does nothing.
func (e *benchEnv) startOTLP() (stop func(), err error) {
	if !*otlpFlag {
		return nil, nil
	}
	r, closeReceiver, err := tracingtest.ListenCounting()
	if err != nil {
		return nil, fmt.Errorf("-otlp: %w", err)
	}
	e.otelEnv = []string{
		tracing.EnvEndpoint + "=" + r.HTTPEndpoint,
		tracing.EnvProtocol + "=http/protobuf",
		"OTEL_TRACES_SAMPLER=always_on",
	}
	fmt.Printf("tracing on: every no8s process exports every span to the OTLP receiver at %s\n", r.HTTPEndpoint)
	return func() {
		fmt.Printf("OTLP receiver: %d spans received\n", r.Len())
		closeReceiver()
	}, nil
}
