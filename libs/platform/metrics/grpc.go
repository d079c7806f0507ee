package metrics

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// GRPC records gRPC calls by service, method and status code, with a
// latency histogram by service and method: the server side
// (no8s_grpc_server_handled_total, no8s_grpc_server_handling_seconds) or
// the client side (no8s_grpc_client_...). Children are cached per method
// and code, so a call costs a map read and two atomic adds.
type GRPC struct {
	handled  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	started  *prometheus.CounterVec
	children sync.Map // callKey → *callChildren
	methods  sync.Map // full method → *methodChildren
}

type callKey struct {
	method string
	code   uint32
}

type methodChildren struct {
	started  prometheus.Counter
	duration prometheus.Observer
}

// NewGRPCServer returns the server-side recorder, registered on reg.
func NewGRPCServer(reg prometheus.Registerer) *GRPC { return newGRPC(reg, "server") }

// NewGRPCClient returns the client-side recorder, registered on reg.
func NewGRPCClient(reg prometheus.Registerer) *GRPC { return newGRPC(reg, "client") }

func newGRPC(reg prometheus.Registerer, side string) *GRPC {
	labels := []string{"grpc_service", "grpc_method"}
	return &GRPC{
		started: MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "grpc_" + side,
			Name: "started_total", Help: "gRPC calls started (" + side + " side), by service and method."}, labels)),
		handled: MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "grpc_" + side,
			Name: "handled_total", Help: "gRPC calls completed (" + side + " side), by service, method and status code."}, append(labels, "grpc_code"))),
		duration: MustVec(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "grpc_" + side,
			Name: "handling_seconds", Help: "Latency of gRPC calls (" + side + " side) until the last message, by service and method.",
			Buckets: DurationBuckets()}, labels)),
	}
}

func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", full
}

func (g *GRPC) method(full string) *methodChildren {
	if c, ok := g.methods.Load(full); ok {
		return c.(*methodChildren)
	}
	svc, m := splitMethod(full)
	c, _ := g.methods.LoadOrStore(full, &methodChildren{started: g.started.WithLabelValues(svc, m), duration: g.duration.WithLabelValues(svc, m)})
	return c.(*methodChildren)
}

func (g *GRPC) done(full string, mc *methodChildren, start time.Time, err error) {
	mc.duration.Observe(time.Since(start).Seconds())
	code := uint32(status.Code(err))
	k := callKey{full, code}
	c, ok := g.children.Load(k)
	if !ok {
		svc, m := splitMethod(full)
		c, _ = g.children.LoadOrStore(k, g.handled.WithLabelValues(svc, m, status.Code(err).String()))
	}
	c.(prometheus.Counter).Inc()
}

// UnaryServer is the server's unary interceptor.
func (g *GRPC) UnaryServer() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		mc := g.method(info.FullMethod)
		mc.started.Inc()
		start := time.Now()
		resp, err := handler(ctx, req)
		g.done(info.FullMethod, mc, start, err)
		return resp, err
	}
}

// StreamServer is the server's stream interceptor.
func (g *GRPC) StreamServer() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		mc := g.method(info.FullMethod)
		mc.started.Inc()
		start := time.Now()
		err := handler(srv, ss)
		g.done(info.FullMethod, mc, start, err)
		return err
	}
}

// UnaryClient is the client's unary interceptor.
func (g *GRPC) UnaryClient() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mc := g.method(method)
		mc.started.Inc()
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		g.done(method, mc, start, err)
		return err
	}
}

// StreamClient is the client's stream interceptor: it counts the stream
// when it is opened (started) and when opening it fails; a stream opened
// is counted as handled with its final status by the recorder of the
// stream's end, which is when RecvMsg returns an error.
func (g *GRPC) StreamClient() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		mc := g.method(method)
		mc.started.Inc()
		start := time.Now()
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			g.done(method, mc, start, err)
			return nil, err
		}
		return &clientStream{ClientStream: cs, g: g, method: method, mc: mc, start: start}, nil
	}
}

type clientStream struct {
	grpc.ClientStream
	g      *GRPC
	method string
	mc     *methodChildren
	start  time.Time
	once   sync.Once
}

func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.once.Do(func() {
			if errors.Is(err, io.EOF) {
				s.g.done(s.method, s.mc, s.start, nil)
				return
			}
			s.g.done(s.method, s.mc, s.start, err)
		})
	}
	return err
}

// ServerOptions are the interceptors of a server, as grpc options.
func (g *GRPC) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.UnaryServer()), grpc.ChainStreamInterceptor(g.StreamServer())}
}

// DialOptions are the interceptors of a client, as grpc dial options.
func (g *GRPC) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(g.UnaryClient()), grpc.WithChainStreamInterceptor(g.StreamClient())}
}
