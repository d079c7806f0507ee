package worker

import (
	"log/slog"
	"net"
	"testing"
)

// TestListenProbesDefaultDoesNotClash shows that the default probe address,
// when taken, gives way to a free port, while an address that was set must
// be free.
func TestListenProbesDefaultDoesNotClash(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	lis, err := listenProbes("", taken.Addr().String(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("default taken: %v", err)
	}
	defer lis.Close()
	if lis.Addr().String() == taken.Addr().String() {
		t.Fatal("listening on the taken address")
	}
	if l, err := listenProbes(taken.Addr().String(), DefaultHealthListen, slog.New(slog.DiscardHandler)); err == nil {
		l.Close()
		t.Fatal("a set address that is taken was accepted")
	}
}
