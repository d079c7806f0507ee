package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// browserPage watches the gateway with the browser's own EventSource and
// reports every event, open and error to the test server that served it.
const browserPage = `<!doctype html>
<html><body><script>
let seq = 0;
function report(kind, extra) {
  const body = JSON.stringify(Object.assign({seq: seq++, kind: kind}, extra));
  const send = (tries) => fetch('/report', {method: 'POST', body: body}).then(r => {
    if (!r.ok) throw new Error('status ' + r.status);
  }).catch(() => { if (tries > 0) setTimeout(() => send(tries - 1), 100); });
  send(20);
}
const es = new EventSource(%q);
for (const t of ['CREATED', 'MODIFIED', 'DELETED', 'RECONCILED', 'PURGED', 'BOOKMARK', 'ERROR']) {
  es.addEventListener(t, e => report('event', {type: t, id: e.lastEventId, data: e.data}));
}
es.onopen = () => report('open', {});
es.onerror = () => report('error', {state: es.readyState});
</script></body></html>`

// browserReport is one message the page posted.
type browserReport struct {
	Seq   int    `json:"seq"`
	Kind  string `json:"kind"`
	Type  string `json:"type"`
	ID    string `json:"id"`
	Data  string `json:"data"`
	State int    `json:"state"`
}

// TestWatchBrowserEventSource: a real browser (headless Chromium) watches
// with EventSource. The gateway is stopped (gracefully, then with kill -9)
// while changes are committed through another gateway; the browser
// reconnects by itself with Last-Event-ID and receives every change once,
// in order, with no gap.
func TestWatchBrowserEventSource(t *testing.T) {
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		p, err := exec.LookPath("chromium")
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("Debian's chromium is not installed: .ci/run must install it")
			}
			t.Skip("Debian's chromium is not installed (.ci/run installs it; in CI this fails)")
		}
		chromium = p
	}
	c := newCluster(t)
	c.startStore("")
	adm := c.startAdmission(c.storeAddrs[0])
	watched := freeAddr(t)
	gw := c.startGatewayAt(watched, c.storeAddrs[0], adm, watchFlags...)
	writer := "http://" + freeAddr(t)
	c.startGatewayAt(writer[len("http://"):], c.storeAddrs[0], adm)
	if r := do(t, http.MethodPost, writer+"/api/v1/resource-types", map[string]any{"name": "Widget", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != http.StatusCreated {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Widget/v1") // no scheduler: only the test's changes are events
	c.startReconciler(c.storeAddrs[0], "Widget/v1")
	r := do(t, http.MethodPost, writer+"/api/v1/resources", map[string]any{"name": "w1", "resource_type_name": "Widget", "resource_type_version": "v1", "spec": map[string]any{"n": 0}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := int64(r.json(t)["id"].(float64))
	n := 0
	change := func() int64 {
		n++
		r := do(t, http.MethodPatch, fmt.Sprintf("%s/api/v1/resources/%d", writer, id), map[string]any{"spec": map[string]any{"n": n}})
		if r.status != http.StatusOK {
			t.Fatalf("patch: %d %s", r.status, r.body)
		}
		return int64(r.json(t)["resource_version"].(float64))
	}

	// The test server serves the page and collects its reports.
	var mu sync.Mutex
	var reports []browserReport
	// EventSource sends no headers: the token goes in the URL.
	page := fmt.Sprintf(browserPage, "http://"+watched+"/api/v1/events?resource_type=Widget&access_token="+adminToken)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, page)
		case "/report":
			var rep browserReport
			if err := json.NewDecoder(r.Body).Decode(&rep); err == nil {
				mu.Lock()
				reports = append(reports, rep)
				mu.Unlock()
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	c.waitPublished() // the browser watches from "now": after the create
	profile := t.TempDir()
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		// The page (test server) and the gateway are different origins and
		// the gateway sends no CORS headers.
		"--disable-web-security",
		"--user-data-dir="+profile, srv.URL+"/")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.CreateTemp(t.TempDir(), "chromium-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the browser's process group
		_ = cmd.Wait()
	}()

	snapshot := func() []browserReport {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(reports)
		sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
		return out
	}
	count := func(kind string) int {
		k := 0
		for _, r := range snapshot() {
			if r.Kind == kind {
				k++
			}
		}
		return k
	}
	// seen reports whether the browser has received revision rev.
	seen := func(rev int64) bool {
		for _, r := range snapshot() {
			if r.Kind == "event" && r.ID == strconv.FormatInt(rev, 10) {
				return true
			}
		}
		return false
	}
	waitFor(t, 30*time.Second, "the browser to connect", func() error {
		for _, r := range snapshot() {
			if r.Kind == "event" && r.Type == "BOOKMARK" {
				return nil
			}
		}
		return fmt.Errorf("reports so far: %v", snapshot())
	})
	var want []int64
	for range 3 {
		want = append(want, change())
	}
	waitFor(t, 20*time.Second, "the browser to receive the first changes", func() error {
		if !seen(want[len(want)-1]) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	for round, kill := range []bool{false, true} {
		opens := count("open")
		if kill {
			gw.kill9()
		} else {
			gw.stop(syscall.SIGTERM, 10*time.Second)
		}
		for range 4 {
			want = append(want, change()) // committed while the gateway is down
		}
		waitFor(t, 20*time.Second, "the browser to notice the gateway is gone", func() error {
			if count("error") <= round {
				return fmt.Errorf("no error event yet")
			}
			return nil
		})
		gw = c.startGatewayAt(watched, c.storeAddrs[0], adm, watchFlags...)
		want = append(want, change())
		waitFor(t, 30*time.Second, "the browser to reconnect and catch up", func() error {
			if count("open") == opens {
				return fmt.Errorf("not reconnected")
			}
			if !seen(want[len(want)-1]) {
				return fmt.Errorf("revision %d not received", want[len(want)-1])
			}
			return nil
		})
	}

	// Compare with every committed change of the resource (the patches,
	// and the noop reconciler's writes) from the browser's first bookmark
	// to the last patch.
	var first int64 = -1
	lastPatch := want[len(want)-1]
	var got []int64
	for _, r := range snapshot() {
		if r.Kind != "event" {
			continue
		}
		rev, _ := strconv.ParseInt(r.ID, 10, 64)
		if r.Type == "BOOKMARK" {
			if first < 0 {
				first = rev
			}
			continue
		}
		if rev > lastPatch {
			continue
		}
		var d struct {
			EventType  string `json:"event_type"`
			ResourceID int64  `json:"resource_id"`
		}
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil || d.EventType != r.Type || d.ResourceID != id {
			t.Fatalf("event %s id %s data %s", r.Type, r.ID, r.Data)
		}
		got = append(got, rev)
	}
	var truth []int64
	for _, e := range c.outboxEvents(first) {
		if e.rev <= lastPatch {
			truth = append(truth, e.rev)
		}
	}
	for _, w := range want {
		if !slices.Contains(truth, w) {
			t.Fatalf("patch revision %d is not after the browser's first bookmark %d", w, first)
		}
	}
	if !slices.Equal(got, truth) {
		// Which side lost it: a gap in the page's report numbers is a lost
		// report (the test's plumbing); none is an event the browser never
		// received.
		all := snapshot()
		for i, r := range all {
			if r.Seq != i {
				t.Errorf("the page's report %d never arrived (the test lost it, not the gateway)", i)
				break
			}
		}
		var lines []string
		for _, r := range all {
			lines = append(lines, fmt.Sprintf("%d:%s/%s/%s", r.Seq, r.Kind, r.Type, r.ID))
		}
		t.Fatalf("the browser received revisions %v, want %v; every report (seq:kind/type/id): %s", got, truth, strings.Join(lines, " "))
	}
	t.Logf("the browser received %d changes over %d connections (%d errors), %d of them committed while its gateway was down: %v",
		len(got), count("open"), count("error"), 8, got)
}
