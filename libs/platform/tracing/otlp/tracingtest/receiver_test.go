package tracingtest

import (
	"bytes"
	"net/http"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
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

// countSpans agrees with decoding on exports with several resources and
// scopes and every other field set, and refuses a malformed body.
func TestCountSpans(t *testing.T) {
	span := func(i byte) *tracepb.Span {
		return &tracepb.Span{TraceId: bytes.Repeat([]byte{i}, 16), SpanId: bytes.Repeat([]byte{i}, 8), Name: "s", Kind: tracepb.Span_SPAN_KIND_SERVER,
			Attributes:        []*commonpb.KeyValue{{Key: "k", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "v"}}}},
			StartTimeUnixNano: 1, EndTimeUnixNano: 2}
	}
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "x"}}}}},
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "a"}, Spans: []*tracepb.Span{span(1), span(2), span(3)}}, {Spans: []*tracepb.Span{span(4)}}},
			SchemaUrl:  "https://example.com"},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span(5), span(6)}}}},
		{},
	}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := countSpans(b); err != nil || n != 6 {
		t.Fatalf("countSpans: %d %v, want 6", n, err)
	}
	if n, err := countSpans(nil); err != nil || n != 0 {
		t.Fatalf("an empty export: %d %v", n, err)
	}
	for _, bad := range [][]byte{b[:len(b)-3], {0x0a, 0xff}, {0xff}} {
		if _, err := countSpans(bad); err == nil {
			t.Errorf("countSpans(%x) took a malformed export", bad)
		}
	}
}

// FuzzCountSpans: countSpans never panics, and on whatever decodes as an
// export it counts what decoding finds.
func FuzzCountSpans(f *testing.F) {
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "a"}, {Name: "b"}}}}}}})
	f.Add(b)
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := countSpans(b)
		var req coltracepb.ExportTraceServiceRequest
		if err != nil || proto.Unmarshal(b, &req) != nil {
			return
		}
		want := 0
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				want += len(ss.GetSpans())
			}
		}
		if n != want {
			t.Fatalf("countSpans %d, decoding %d", n, want)
		}
	})
}
