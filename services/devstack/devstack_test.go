package devstack

import (
	"net"
	"testing"
)

// TestDevListensOnLoopbackByDefault shows that `no8s dev` serves the API on
// loopback only unless told otherwise, as development servers should.
func TestDevListensOnLoopbackByDefault(t *testing.T) {
	host, _, err := net.SplitHostPort(DefaultConfig().HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		t.Fatalf("no8s dev listens on %q by default, want a loopback address", DefaultConfig().HTTPAddr)
	}
}
