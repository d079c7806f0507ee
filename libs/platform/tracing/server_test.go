package tracing_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/no8s/no8s/libs/platform/tracing"
)

// recording is a Tracing whose spans are kept in memory.
func recording(t *testing.T) (*tracing.Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// testService is a gRPC service of two unary methods: Ok answers, Fail
// answers the code in the context's "code" value.
func testService() *grpc.ServiceDesc {
	method := func(name string, err error) grpc.MethodDesc {
		return grpc.MethodDesc{MethodName: name, Handler: func(_ any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			req := new(emptypb.Empty)
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) {
				if err != nil {
					return nil, err
				}
				return &emptypb.Empty{}, nil
			}
			if in == nil {
				return h(ctx, req)
			}
			return in(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/test.v1.Things/" + name}, h)
		}}
	}
	return &grpc.ServiceDesc{ServiceName: "test.v1.Things", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{
		method("Ok", nil), method("Missing", status.Error(codes.NotFound, "no such thing")), method("Broken", status.Error(codes.Internal, "boom")),
	}}
}

// A traced gRPC call is one server span, the child of the caller's, named
// service/method with its status code; a server failure marks it an error,
// a caller's (NotFound) does not; an untraced call records none.
func TestGRPCServerSpans(t *testing.T) {
	tr, rec := recording(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(tr.GRPCServerOptions()...)
	srv.RegisterService(testService(), struct{}{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), append(tr.GRPCDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(ctx context.Context, m string) error {
		return conn.Invoke(ctx, "/test.v1.Things/"+m, &emptypb.Empty{}, &emptypb.Empty{})
	}
	if err := call(context.Background(), "Ok"); err != nil {
		t.Fatal(err)
	}
	ctx, parent := tr.Tracer("test").Start(context.Background(), "caller")
	for _, m := range []string{"Ok", "Missing", "Broken"} {
		_ = call(ctx, m)
	}
	parent.End()
	srv.GracefulStop()

	want := map[string]struct {
		code  codes.Code
		error bool
	}{"test.v1.Things/Ok": {codes.OK, false}, "test.v1.Things/Missing": {codes.NotFound, false}, "test.v1.Things/Broken": {codes.Internal, true}}
	var servers int
	for _, s := range rec.Ended() {
		if s.SpanKind() != trace.SpanKindServer {
			continue
		}
		servers++
		w, ok := want[s.Name()]
		a := attrs(s)
		if !ok || s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() ||
			a["rpc.system"].AsString() != "grpc" || a["rpc.service"].AsString() != "test.v1.Things" ||
			a["rpc.grpc.status_code"].AsInt64() != int64(w.code) || (s.Status().Code == otelcodes.Error) != w.error {
			t.Errorf("server span %s: parent %s, attributes %v, status %+v", s.Name(), s.Parent().SpanID(), a, s.Status())
		}
	}
	if servers != 3 {
		t.Fatalf("%d server spans, want 3 (none for the untraced call)", servers)
	}
}

// An HTTP request is a server span continuing the traceparent it carries,
// with its method, path and status (a 5xx an error); a streaming handler
// still flushes through the span's writer.
func TestHTTPServerSpans(t *testing.T) {
	tr, rec := recording(t)
	h := tr.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			_, _ = io.WriteString(w, "data: 1\n\n")
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("flush through the span's writer: %v", err)
			}
		case "/broken":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}), "test-server")
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, parent := tr.Tracer("test").Start(context.Background(), "client")
	for _, p := range []string{"/things", "/broken", "/stream"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+p, nil)
		tracing.InjectHTTP(ctx, req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	parent.End()
	srv.Close()

	want := map[string]int64{"/things": 201, "/broken": 503, "/stream": 200}
	var n int
	for _, s := range rec.Ended() {
		if s.SpanKind() != trace.SpanKindServer {
			continue
		}
		n++
		a := attrs(s)
		path := a["url.path"].AsString()
		if s.Name() != http.MethodPost || s.Parent().SpanID() != parent.SpanContext().SpanID() || a["server.name"].AsString() != "test-server" ||
			a["http.request.method"].AsString() != http.MethodPost || a["http.response.status_code"].AsInt64() != want[path] ||
			(s.Status().Code == otelcodes.Error) != (want[path] >= 500) {
			t.Errorf("span %s %s: parent %s attributes %v status %+v", s.Name(), path, s.Parent().SpanID(), a, s.Status())
		}
	}
	if n != 3 {
		t.Fatalf("%d server spans, want 3", n)
	}
}
