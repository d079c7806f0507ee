package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRegistrySyncIsolatesDatasources (issue 27, scope 2): a registry whose
// datasource is a port that accepts connections and never answers SQL, and
// an HttpSource whose server never answers, sync beside a healthy registry
// with a 2 s interval; the healthy one keeps its interval (asserted with a
// generous bound) while the other two hang for their own timeouts (15 s and
// 60 s).
func TestRegistrySyncIsolatesDatasources(t *testing.T) {
	mostlyWaits(t)
	c := newTenantCluster(t)

	// A datasource port that never answers: connections are accepted and
	// held open, nothing is ever written.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	done := make(chan struct{})
	held.Go(func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		go func() { <-done; mute.Close() }()
		for {
			conn, err := mute.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
		}
	})
	// An HttpSource server that never answers while the test runs.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); hang.Close(); held.Wait() })

	rs := c.startSync("iso")
	c.waitSyncLeads()
	ds := newPostgresDatasource(t)
	ds.insert("alpha", "alpha.example.com", "1")
	src := ds.source()
	src["port"] = mute.Addr().(*net.TCPAddr).Port
	c.create(registryBody("mute", src))
	hs := httpSourceBody("hanging", hang.URL+"/feed")
	hs["spec"].(map[string]any)["timeoutSeconds"] = 60
	// No credential: secret references need a grant, and hanging needs none.
	delete(hs["spec"].(map[string]any), "headers")
	c.create(hs)
	// Let both hang first, then add the healthy registry.
	time.Sleep(2 * time.Second)
	c.create(registryBody("healthy", ds.source()))

	const window = 24 * time.Second
	time.Sleep(window + 2*time.Second)
	syncs, muteFailed, hangFailed := syncTimes(t, rs.log.Name())
	t.Logf("healthy registry synced %d times; the mute registry's reads failed %d times, the hanging source's polls %d times", len(syncs), muteFailed, hangFailed)
	if len(syncs) < 2 {
		t.Fatalf("the healthy registry synced %d times in %s", len(syncs), window)
	}
	var gaps []string
	longest := time.Duration(0)
	for i := 1; i < len(syncs); i++ {
		d := syncs[i].Sub(syncs[i-1])
		gaps = append(gaps, d.Round(10*time.Millisecond).String())
		longest = max(longest, d)
	}
	t.Logf("intervals between the healthy registry's syncs: %s (longest %s)", strings.Join(gaps, " "), longest.Round(time.Millisecond))
	// Interval 2 s: at least 8 syncs in 24 s, none more than 5 s apart
	// (a stalled loop waits 15 s for the mute datasource, 60 s for the
	// hanging source).
	if len(syncs) < 8 || longest > 5*time.Second {
		t.Errorf("the healthy registry synced %d times, longest gap %s: want at least 8 and at most 5 s apart beside the hanging datasources", len(syncs), longest)
	}
	if muteFailed == 0 {
		t.Errorf("the mute datasource's read never failed: was it tried?")
	}
	if hangFailed != 0 {
		t.Errorf("the hanging source's poll failed %d times within its 60 s timeout", hangFailed)
	}
}

// syncTimes reads registry-sync's log: the times of the healthy registry's
// syncs, how many reads of the mute registry failed and how many polls of
// the hanging source.
func syncTimes(t *testing.T, path string) (syncs []time.Time, muteFailed, hangFailed int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "msg=sync ") && strings.Contains(line, "registry=healthy "):
			ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			syncs = append(syncs, at)
		case strings.Contains(line, "datasource read failed") && strings.Contains(line, "registry=mute "):
			muteFailed++
		case strings.Contains(line, "poll failed") && strings.Contains(line, "httpsource=hanging "):
			hangFailed++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(fmt.Errorf("read %s: %w", path, err))
	}
	return syncs, muteFailed, hangFailed
}
