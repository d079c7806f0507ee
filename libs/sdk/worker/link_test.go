package worker

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// count returns the lines holding every one of want.
func (s *syncBuffer) count(want ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for line := range strings.Lines(s.b.String()) {
		all := true
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	return n
}

// TestLinkWarnsOncePerChange: a store worker address where nothing listens
// makes the link report it (naming the address) on every check, with one
// WARN however many checks fail, and one INFO once it answers.
func TestLinkWarnsOncePerChange(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there now
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: grpcbackoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.2, MaxDelay: 200 * time.Millisecond}}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var logs syncBuffer
	k := newLink(conn, nil, time.Second, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := k.storeDown(); err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("before the first check: %v", err)
	}
	for range 4 {
		k.check(t.Context())
		if err := k.storeDown(); err == nil || !strings.Contains(err.Error(), addr) {
			t.Fatalf("store down: %v", err)
		}
	}
	if w, d := logs.count("level=WARN", addr), logs.count("level=DEBUG", "still unreachable"); w != 1 || d != 3 {
		t.Fatalf("%d WARN, %d DEBUG lines:\n%s", w, d, logs.b.String())
	}

	// The store comes (on the same address): one INFO, and ready.
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for k.check(t.Context()); k.storeDown() != nil; k.check(t.Context()) {
		if time.Now().After(deadline) {
			t.Fatalf("still down: %v", k.storeDown())
		}
		<-time.After(50 * time.Millisecond) // the next check, as the watch's ticker would
	}
	if store, _ := k.readiness(); store != nil {
		t.Fatalf("readiness: %v", store)
	}
	if n := logs.count("level=INFO", "reachable again", addr); n != 1 {
		t.Fatalf("%d INFO lines:\n%s", n, logs.b.String())
	}
	if n := logs.count("level=WARN"); n != 1 {
		t.Fatalf("%d WARN lines:\n%s", n, logs.b.String())
	}
}
