package tracing_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/tracing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want tracing.Settings
		err  string
	}{
		{name: "nothing set: off", env: nil},
		{name: "endpoint: on, http by default", env: map[string]string{tracing.EnvEndpoint: "http://c:4318"},
			want: tracing.Settings{Endpoint: "http://c:4318", Protocol: tracing.ProtocolHTTP}},
		{name: "traces endpoint wins", env: map[string]string{tracing.EnvEndpoint: "http://a:4318", tracing.EnvTracesEndpoint: "http://b:4318/v1/traces"},
			want: tracing.Settings{Endpoint: "http://b:4318/v1/traces", Protocol: tracing.ProtocolHTTP}},
		{name: "grpc", env: map[string]string{tracing.EnvEndpoint: "http://c:4317", tracing.EnvProtocol: "grpc"},
			want: tracing.Settings{Endpoint: "http://c:4317", Protocol: tracing.ProtocolGRPC}},
		{name: "traces protocol wins", env: map[string]string{tracing.EnvEndpoint: "http://c:4317", tracing.EnvProtocol: "http/protobuf", tracing.EnvTracesProtocol: "grpc"},
			want: tracing.Settings{Endpoint: "http://c:4317", Protocol: tracing.ProtocolGRPC}},
		{name: "exporter none: off", env: map[string]string{tracing.EnvEndpoint: "http://c:4318", tracing.EnvTracesExporter: "none"}},
		{name: "blank endpoint: off", env: map[string]string{tracing.EnvEndpoint: "  "}},
		{name: "unknown exporter", env: map[string]string{tracing.EnvEndpoint: "http://c:4318", tracing.EnvTracesExporter: "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "unknown protocol", env: map[string]string{tracing.EnvEndpoint: "http://c:4318", tracing.EnvProtocol: "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := tracing.FromEnv(env(c.env))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// Off, nothing is installed: no server or client options, handlers and
// transports unchanged; a nil Tracing is off too.
func TestOffInstallsNothing(t *testing.T) {
	for _, tr := range []*tracing.Tracing{tracing.Off(), nil} {
		if tr.Enabled() || len(tr.GRPCServerOptions()) != 0 || len(tr.GRPCDialOptions()) != 0 {
			t.Fatalf("off: enabled %v, %d server options, %d dial options", tr.Enabled(), len(tr.GRPCServerOptions()), len(tr.GRPCDialOptions()))
		}
		h := http.NotFoundHandler()
		if got := fmt.Sprintf("%T", tr.HTTPHandler(h, "x")); got != fmt.Sprintf("%T", h) {
			t.Fatalf("off: handler wrapped (%s)", got)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Outside a span, log lines are unchanged.
func TestLogHandlerWithoutSpan(t *testing.T) {
	var b bytes.Buffer
	slog.New(tracing.LogHandler(slog.NewTextHandler(&b, nil))).InfoContext(context.Background(), "plain")
	if strings.Contains(b.String(), "trace_id") {
		t.Fatalf("a line outside a span carries a trace id: %s", b.String())
	}
}
