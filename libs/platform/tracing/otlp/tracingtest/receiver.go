// Package tracingtest is an OTLP trace receiver for tests: it takes the
// spans that processes export (OTLP over gRPC and over HTTP with protobuf
// bodies, the official OTLP types) and lets a test look at them, trace by
// trace. The processes under test are real ones: nothing of this package
// runs inside them.
package tracingtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Span is one span received, with the service that sent it.
type Span struct {
	Service  string
	Name     string
	TraceID  string
	SpanID   string
	ParentID string
	Kind     tracepb.Span_SpanKind
	Attrs    map[string]string
	Links    []string // trace ids of the span's links
	Start    time.Time
	End      time.Time
}

// Receiver collects spans sent to it.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer

	// GRPCEndpoint is the OTLP/gRPC endpoint (http://127.0.0.1:port) and
	// HTTPEndpoint the OTLP/HTTP one, for OTEL_EXPORTER_OTLP_ENDPOINT.
	GRPCEndpoint, HTTPEndpoint string

	// countOnly keeps no span, only their number (ListenCounting).
	countOnly bool

	mu    sync.Mutex
	spans []Span
	count int
}

// Start runs a receiver on loopback until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r, stop, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return r
}

// Listen runs a receiver on loopback until stop is called (a receiver for
// a program rather than a test).
func Listen() (r *Receiver, stop func(), err error) { return listen(&Receiver{}) }

// ListenCounting is Listen for a receiver that keeps only the number of
// spans (Len), as cheap as a receiver can be that still reads what it is
// sent: over HTTP it walks each export's protobuf encoding down to the
// spans and counts them without decoding them. The benchmark's, where a
// receiver that decodes or keeps every span would take the load
// generator's CPU from the processes it measures.
func ListenCounting() (r *Receiver, stop func(), err error) {
	return listen(&Receiver{countOnly: true})
}

func listen(r *Receiver) (*Receiver, func(), error) {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP/gRPC listener: %w", err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		return nil, nil, fmt.Errorf("OTLP/HTTP listener: %w", err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(gl) }()
	r.GRPCEndpoint = "http://" + gl.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	r.HTTPEndpoint = "http://" + hl.Addr().String()
	return r, func() { srv.Stop(); _ = hs.Close() }, nil
}

// Export is OTLP/gRPC's TraceService.Export.
func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(io.LimitReader(req.Body, 32<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.countOnly {
		n, err := countSpans(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.count += n
		r.mu.Unlock()
	} else {
		var in coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&in)
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	if r.countOnly {
		n := 0
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				n += len(ss.GetSpans())
			}
		}
		r.mu.Lock()
		r.count += n
		r.mu.Unlock()
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: service, Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), Kind: s.GetKind(), Attrs: attrs(s.GetAttributes()),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano()))}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentID = hex.EncodeToString(p)
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId()))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = anyString(kv.GetValue())
	}
	return m
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	default:
		return v.String()
	}
}

// Len is the number of spans received so far.
func (r *Receiver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans) + r.count
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Trace returns the spans of the trace with id traceID.
func (r *Receiver) Trace(traceID string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// WaitFor waits up to timeout until ok holds for the spans received, and
// returns them; it fails the test at the deadline, listing what came.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, what string, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, still no %s; %d spans received:\n%s", timeout, what, len(spans), Describe(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Describe lists spans one per line, for failure messages.
func Describe(spans []Span) string {
	var b []byte
	for _, s := range spans {
		b = fmt.Appendf(b, "  %s %s trace=%s span=%s parent=%s kind=%s\n", s.Service, s.Name, s.TraceID, s.SpanID, s.ParentID, s.Kind)
	}
	return string(b)
}

// The field numbers of the OTLP messages countSpans walks:
// ExportTraceServiceRequest.resource_spans, ResourceSpans.scope_spans and
// ScopeSpans.spans.
const (
	fieldResourceSpans = 1
	fieldScopeSpans    = 2
	fieldSpans         = 2
)

// countSpans counts the spans of an encoded ExportTraceServiceRequest
// without decoding them: it walks the embedded messages down to each
// ScopeSpans and counts its spans fields.
func countSpans(b []byte) (int, error) {
	n := 0
	err := eachField(b, fieldResourceSpans, func(rs []byte) error {
		return eachField(rs, fieldScopeSpans, func(ss []byte) error {
			return eachField(ss, fieldSpans, func([]byte) error {
				n++
				return nil
			})
		})
	})
	return n, err
}

// eachField calls fn with every length-delimited field number num of the
// message b, skipping the other fields.
func eachField(b []byte, num protowire.Number, fn func([]byte) error) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("malformed export: %w", protowire.ParseError(l))
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return fmt.Errorf("malformed export: %w", protowire.ParseError(l))
			}
			if err := fn(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return fmt.Errorf("malformed export: %w", protowire.ParseError(l))
		}
		b = b[l:]
	}
	return nil
}
