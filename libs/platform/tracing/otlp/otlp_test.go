package otlp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/platform/tracing/otlp"
	"github.com/no8s/no8s/libs/platform/tracing/otlp/tracingtest"
)

// Off, nothing is installed: no server or client options, handlers and
// transports unchanged.
func TestOffInstallsNothing(t *testing.T) {
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	tr, err := otlp.Start(context.Background(), "test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
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

// A request carrying a traceparent is continued: the server's span is in
// the caller's trace, its child, and reaches the receiver over both OTLP
// protocols; a log line written inside it carries the trace and span ids.
func TestHTTPSpanContinuesTraceparentAndLogs(t *testing.T) {
	for _, proto := range []string{tracing.ProtocolGRPC, tracing.ProtocolHTTP} {
		t.Run(proto, func(t *testing.T) {
			rcv := tracingtest.Start(t)
			endpoint := rcv.HTTPEndpoint
			if proto == tracing.ProtocolGRPC {
				endpoint = rcv.GRPCEndpoint
			}
			t.Setenv(tracing.EnvEndpoint, endpoint)
			t.Setenv(tracing.EnvProtocol, proto)
			t.Setenv("OTEL_SERVICE_NAME", "")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
			tr, err := otlp.Start(context.Background(), "no8s-test", slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			var text, js bytes.Buffer
			logText := slog.New(tracing.LogHandler(slog.NewTextHandler(&text, nil)))
			logJSON := slog.New(tracing.LogHandler(slog.NewJSONHandler(&js, nil))).With("service", "x")
			srv := httptest.NewServer(tr.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				logText.InfoContext(r.Context(), "inside")
				logJSON.InfoContext(r.Context(), "inside")
				_, _ = io.WriteString(w, "ok")
			}), "test-server"))
			defer srv.Close()

			const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
			req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := rcv.WaitFor(t, 10*time.Second, "span of the request", func(s []tracingtest.Span) bool { return len(s) > 0 })
			s := spans[0]
			if s.TraceID != traceID || s.ParentID != parent || s.Service != "no8s-test" {
				t.Fatalf("span %+v: want trace %s, parent %s, service no8s-test", s, traceID, parent)
			}
			if !strings.Contains(text.String(), "trace_id="+traceID) || !strings.Contains(text.String(), "span_id="+s.SpanID) {
				t.Fatalf("text log line without the span's ids: %s", text.String())
			}
			var line map[string]any
			if err := json.Unmarshal(js.Bytes(), &line); err != nil {
				t.Fatal(err)
			}
			if line["trace_id"] != traceID || line["span_id"] != s.SpanID || line["service"] != "x" {
				t.Fatalf("JSON log line %v: want trace_id %s span_id %s", line, traceID, s.SpanID)
			}
		})
	}
}
