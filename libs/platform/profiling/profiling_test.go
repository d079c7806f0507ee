package profiling_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/profiling"
)

func TestOnlyLoopback(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0", "127.1.2.3:0"} {
		if err := profiling.CheckLoopback(addr); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	for _, addr := range []string{":6060", "0.0.0.0:6060", "10.0.0.1:6060", "[::]:6060", "example.com:6060", "nonsense"} {
		if err := profiling.CheckLoopback(addr); err == nil {
			t.Errorf("%s accepted", addr)
		}
	}
	if _, err := profiling.Serve(t.Context(), ":0", nil); err == nil {
		t.Error("Serve on every interface was accepted")
	}
}

func TestServesProfilesAndOffServesNothing(t *testing.T) {
	for _, addr := range []string{profiling.Off, "", "127.0.0.1:0"} {
		stop, err := profiling.Serve(t.Context(), addr, nil)
		if err != nil {
			t.Fatalf("%q: %v", addr, err)
		}
		stop()
	}
	srv := httptest.NewServer(profiling.Handler())
	defer srv.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "goroutine") {
			t.Errorf("%s: %d %.100s", path, resp.StatusCode, b)
		}
	}
}
