package tracingtest

import (
	"bytes"
	"net/http"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestCountingReceiverKeepsOnlyTheNumber: ListenCounting's receiver reads
// each export and counts its spans, keeping none; Listen's keeps them.
func TestCountingReceiverKeepsOnlyTheNumber(t *testing.T) {
	body, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
			{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{1}, 8), Name: "a"},
			{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: "b"},
		}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		listen func() (*Receiver, func(), error)
		kept   int
	}{{"counting", ListenCounting, 0}, {"keeping", Listen, 2}} {
		r, stop, err := c.listen()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(r.HTTPEndpoint+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		stop()
		if resp.StatusCode != http.StatusOK || r.Len() != 2 || len(r.Spans()) != c.kept {
			t.Errorf("%s: status %d, Len %d, kept %d spans; want 200, 2, %d", c.name, resp.StatusCode, r.Len(), len(r.Spans()), c.kept)
		}
	}
}
