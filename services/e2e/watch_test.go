package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/labelselector"
)

// watchFlags make the gateway's watch timers short enough for tests.
var watchFlags = []string{"--watch-heartbeat", "500ms", "--watch-bookmark", "1s"}

// startGatewayAt starts a gateway process on addr (a restart reuses the
// address, as a client would see it) and waits until it is healthy.
func (c *cluster) startGatewayAt(addr, storeAddr, admissionAddr string, extra ...string) *proc {
	c.t.Helper()
	args := append(append([]string{"--listen", addr, "--store-addr", storeAddr, "--admission-addr", admissionAddr, "--nats-url", c.natsURL, noRateLimit}, extra...),
		c.identityArgs(identity.Gateway)...)
	p := start(c.t, "gateway", filepath.Join(binDir, "no8s-gateway"), args)
	waitFor(c.t, 20*time.Second, "gateway health on "+addr, func() error {
		if err := p.exited(); err != nil {
			return err
		}
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health %d", resp.StatusCode)
		}
		return nil
	})
	return p
}

// sseEvent is one event read from a watch.
type sseEvent struct {
	name string
	id   int64
	data []byte
	// at is when the client read it.
	at time.Time
	// conn numbers the test watcher's connection that carried it.
	conn int
}

// sseConn is an open watch. Events arrive on events until the stream ends;
// then err holds why.
type sseConn struct {
	resp   *http.Response
	events chan sseEvent
	err    error
	cancel context.CancelFunc
}

// dialWatch opens a watch. A non-200 answer is returned as an error with
// the status and body. smallBuffer dials with a tiny receive buffer, so
// that a client that stops reading blocks the gateway's writes soon.
func dialWatch(ctx context.Context, url string, lastEventID int64, smallBuffer bool, buffer int) (*sseConn, int, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if smallBuffer {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	client := &http.Client{Transport: withAdminToken(&http.Transport{DialContext: d.DialContext, DisableCompression: true})}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, 0, err
	}
	if lastEventID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	c := &sseConn{resp: resp, events: make(chan sseEvent, buffer), cancel: cancel}
	go c.read()
	return c, resp.StatusCode, nil
}

func (c *sseConn) read() {
	defer close(c.events)
	r := bufio.NewReaderSize(c.resp.Body, 64<<10)
	var ev sseEvent
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				// A long data line: read the rest.
				rest, err2 := r.ReadString('\n')
				line = append(slices.Clone(line), rest...)
				err = err2
			}
			if err != nil {
				c.err = err
				return
			}
		}
		s := strings.TrimSuffix(string(line), "\n")
		switch {
		case s == "":
			if ev.name != "" {
				ev.at = time.Now()
				c.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(s, "event: "):
			ev.name = s[7:]
		case strings.HasPrefix(s, "id: "):
			ev.id, _ = strconv.ParseInt(s[4:], 10, 64)
		case strings.HasPrefix(s, "data: "):
			ev.data = []byte(s[6:])
		}
	}
}

func (c *sseConn) close() {
	c.cancel()
	c.resp.Body.Close()
	for range c.events {
	}
}

// watchFilter is what a test watcher asks for, and how the test decides
// which committed change it must receive.
type watchFilter struct {
	name                  string
	query                 string // path and query
	typeName, typeVersion string
	resourceID            int64
	selector              labelselector.Selector
}

func (f watchFilter) matches(d *eventstream.Decoded) bool {
	if f.typeName != "" && d.ResourceTypeName != f.typeName {
		return false
	}
	if f.typeVersion != "" && d.ResourceTypeVersion != f.typeVersion {
		return false
	}
	if f.resourceID != 0 && d.ResourceID != f.resourceID {
		return false
	}
	return f.selector.Matches(d.Labels)
}

// committed is one row of the store's outbox: the truth of what changed.
type committed struct {
	rev int64
	ev  *eventstream.Decoded
}

// outboxEvents reads every committed change after since, in revision order.
func (c *cluster) outboxEvents(since int64) []committed {
	c.t.Helper()
	rows, err := c.pool.Query(c.t.Context(), `SELECT revision, payload FROM outbox WHERE revision > $1 ORDER BY revision`, since)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	var out []committed
	for rows.Next() {
		var rev int64
		var payload []byte
		if err := rows.Scan(&rev, &payload); err != nil {
			c.t.Fatal(err)
		}
		d, err := eventstream.Decode(payload)
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, committed{rev, d})
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// waitPublished waits until the relay has published every committed change
// and returns the newest revision.
func (c *cluster) waitPublished() int64 {
	c.t.Helper()
	var last int64
	if err := c.pool.QueryRow(c.t.Context(), `SELECT coalesce(pg_sequence_last_value('revision_seq'), 0)`).Scan(&last); err != nil {
		c.t.Fatal(err)
	}
	waitFor(c.t, 60*time.Second, "the relay to publish everything", func() error {
		var published int64
		if err := c.pool.QueryRow(c.t.Context(), `SELECT published_revision FROM relay_state`).Scan(&published); err != nil {
			return err
		}
		if published < last {
			return fmt.Errorf("published up to %d of %d", published, last)
		}
		return nil
	})
	return last
}

// received is what one test watcher got, across all its connections.
type received struct {
	mu     sync.Mutex
	events []sseEvent
	last   int64 // the newest id seen (event or bookmark)
	conns  int
	errs   []string
	// log records each connection: its gateway, resume point and how it ended.
	log []string
}

func (r *received) position() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// TestWatchResumeChaos is the exactly-once test: changes committed
// by concurrent writers while watchers disconnect at random, reconnect to
// either of two gateways with their Last-Event-ID, and both gateways are
// restarted (gracefully or with kill -9) again and again. Resume points are
// routinely older than the serving gateway's start. Afterwards each
// watcher's events equal the committed changes matching its filter, in
// revision order (so per resource in order), with no duplicate.
func TestWatchResumeChaos(t *testing.T) {
	changes := rounds(2000, 10000)
	c := newCluster(t)
	c.startStore("")
	adm := c.startAdmission(c.storeAddrs[0])
	addrs := []string{freeAddr(t), freeAddr(t)}
	gws := make([]*proc, len(addrs))
	for i, a := range addrs {
		gws[i] = c.startGatewayAt(a, c.storeAddrs[0], adm, watchFlags...)
	}
	base := "http://" + addrs[0]
	for _, ty := range []string{"Alpha", "Beta"} {
		r := do(t, http.MethodPost, base+"/api/v1/resource-types", map[string]any{"name": ty, "version": "v1", "schema": map[string]any{"type": "object"}})
		if r.status != http.StatusCreated {
			t.Fatalf("create type %s: %d %s", ty, r.status, r.body)
		}
	}
	// The scheduler and the noop reconciler run: deletes complete (cleanup,
	// then PURGED), and reconciles add events the watchers must see too.
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	c.startReconciler(c.storeAddrs[0], "Alpha/v1", "Beta/v1")
	c.startReconciler(c.storeAddrs[0], "Alpha/v1", "Beta/v1")
	pinned := do(t, http.MethodPost, base+"/api/v1/resources", map[string]any{"name": "pinned", "resource_type_name": "Alpha", "resource_type_version": "v1", "spec": map[string]any{}})
	if pinned.status != http.StatusCreated {
		t.Fatalf("create pinned: %d %s", pinned.status, pinned.body)
	}
	pinnedID := int64(pinned.json(t)["id"].(float64))
	// Watchers start from a list's X-Resource-Version (list-then-watch).
	list := do(t, http.MethodGet, base+"/api/v1/resources?limit=1", nil)
	since, err := strconv.ParseInt(list.header.Get("X-Resource-Version"), 10, 64)
	if err != nil {
		t.Fatalf("X-Resource-Version %q", list.header.Get("X-Resource-Version"))
	}
	prod, _ := labelselector.Parse("env=prod")
	filters := []watchFilter{
		{name: "all", query: "/api/v1/events"},
		{name: "alpha", query: "/api/v1/events?resource_type=Alpha", typeName: "Alpha"},
		{name: "beta-v1", query: "/api/v1/events?resource_type=Beta&resource_type_version=v1", typeName: "Beta", typeVersion: "v1"},
		{name: "prod", query: "/api/v1/events?label_selector=env%3Dprod", selector: prod},
		{name: "pinned", query: fmt.Sprintf("/api/v1/resources/%d/events", pinnedID), resourceID: pinnedID},
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	results := make([]*received, len(filters))
	var wg sync.WaitGroup
	stopWatch := make(chan struct{})
	for i, f := range filters {
		results[i] = &received{last: since}
		wg.Add(1)
		go func() {
			defer wg.Done()
			chaosWatcher(ctx, f, addrs, results[i], stopWatch)
		}()
	}

	// Writers.
	var done atomic.Int64
	writeCtx, stopWrites := context.WithCancel(ctx)
	defer stopWrites()
	var wwg sync.WaitGroup
	for w := range 6 {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for writeCtx.Err() == nil && done.Load() < int64(changes) {
				n := chaosWrite(writeCtx, "http://"+addrs[rng.IntN(len(addrs))], rng, w, pinnedID)
				done.Add(int64(n))
			}
		}()
	}
	// Chaos: restart gateways while the writers write.
	restarts := 0
	for done.Load() < int64(changes) {
		select {
		case <-time.After(time.Duration(300+rand.IntN(700)) * time.Millisecond):
		case <-t.Context().Done():
			return
		}
		i := rand.IntN(len(gws))
		if rand.IntN(2) == 0 {
			gws[i].kill9()
		} else {
			gws[i].stop(syscall.SIGTERM, 10*time.Second)
		}
		// Down for a while: watchers and writers use the other one.
		<-time.After(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		gws[i] = c.startGatewayAt(addrs[i], c.storeAddrs[0], adm, watchFlags...)
		restarts++
	}
	stopWrites()
	wwg.Wait()
	last := c.waitPublished()
	// Let every watcher reach the newest revision (bookmarks carry the
	// filtered ones there), then stop them.
	waitFor(t, 60*time.Second, "watchers to catch up", func() error {
		for i, r := range results {
			if p := r.position(); p < last {
				r.mu.Lock()
				defer r.mu.Unlock()
				return fmt.Errorf("watcher %s at %d of %d (errors %v; last connections %v)", filters[i].name, p, last, r.errs, r.log[max(0, len(r.log)-4):])
			}
		}
		return nil
	})
	close(stopWatch)
	wg.Wait()

	// The noop reconciler may still be writing: compare up to last.
	var truth []committed
	for _, e := range c.outboxEvents(since) {
		if e.rev <= last {
			truth = append(truth, e)
		}
	}
	t.Logf("%d changes committed (revisions %d..%d), %d gateway restarts", len(truth), since+1, last, restarts)
	if len(truth) < changes {
		t.Fatalf("only %d changes committed", len(truth))
	}
	for i, f := range filters {
		r := results[i]
		var want []int64
		for _, e := range truth {
			if f.matches(e.ev) {
				want = append(want, e.rev)
			}
		}
		got := make([]int64, 0, len(r.events))
		for _, e := range r.events {
			if e.id <= last {
				got = append(got, e.id)
			}
		}
		t.Logf("watcher %-8s %5d events over %3d connections", f.name, len(got), r.conns)
		if len(r.errs) > 0 {
			t.Errorf("watcher %s: %v", f.name, r.errs)
		}
		if !slices.Equal(got, want) {
			t.Errorf("watcher %s: received %d events, want %d; first difference: %s", f.name, len(got), len(want), firstDiff(got, want))
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					from := max(0, i-3)
					for _, e := range r.events[from:min(len(r.events), i+3)] {
						t.Logf("  revision %d on conn %d", e.id, e.conn)
					}
					for _, l := range r.log {
						t.Logf("  %s", l)
					}
					break
				}
			}
		}
	}
}

func firstDiff(got, want []int64) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d got revision %d, want %d (previous %v)", i, got[i], want[i], got[max(0, i-3):i])
		}
	}
	if len(got) > len(want) {
		return fmt.Sprintf("extra revisions from %d: %v", len(want), got[len(want):min(len(got), len(want)+5)])
	}
	if len(want) > len(got) {
		return fmt.Sprintf("missing revisions from %d: %v", len(got), want[len(got):min(len(want), len(got)+5)])
	}
	return "none"
}

// chaosWatcher watches through random gateways with random disconnects,
// always resuming from the newest id it saw, until stop.
func chaosWatcher(ctx context.Context, f watchFilter, addrs []string, r *received, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		url := "http://" + addrs[rand.IntN(len(addrs))] + f.query
		conn, status, err := dialWatch(ctx, url, r.position(), false, 1024)
		if err != nil {
			if status == http.StatusGone || status == http.StatusBadRequest {
				r.mu.Lock()
				r.errs = append(r.errs, err.Error())
				r.mu.Unlock()
				return
			}
			<-time.After(50 * time.Millisecond) // that gateway is down
			continue
		}
		r.mu.Lock()
		r.conns++
		connNo := r.conns
		r.log = append(r.log, fmt.Sprintf("conn %d to %s from %d", connNo, url, r.last))
		r.mu.Unlock()
		// Stay connected for a random while (or until the gateway goes).
		timer := time.NewTimer(time.Duration(50+rand.IntN(700)) * time.Millisecond)
	read:
		for {
			select {
			case ev, ok := <-conn.events:
				if !ok {
					break read
				}
				r.mu.Lock()
				switch ev.name {
				case "BOOKMARK":
					r.log = append(r.log, fmt.Sprintf("conn %d bookmark %d", connNo, ev.id))
					if ev.id < r.last {
						r.errs = append(r.errs, fmt.Sprintf("bookmark %d after %d", ev.id, r.last))
					}
					r.last = max(r.last, ev.id)
				case "ERROR":
					r.errs = append(r.errs, "ERROR event: "+string(ev.data))
				default:
					ev.conn = connNo
					r.events = append(r.events, ev)
					r.last = ev.id
				}
				r.mu.Unlock()
			case <-timer.C:
				break read
			case <-stop:
				break read
			}
		}
		timer.Stop()
		conn.close()
		r.mu.Lock()
		r.log = append(r.log, fmt.Sprintf("conn %d closed at %d (%v)", connNo, r.last, conn.err))
		r.mu.Unlock()
		// Sometimes stay away, so that changes pile up meanwhile.
		if rand.IntN(3) == 0 {
			<-time.After(time.Duration(rand.IntN(1000)) * time.Millisecond)
		}
	}
}

// chaosWrite does one random write through a gateway and returns how many
// events it committed (0 when it failed).
func chaosWrite(ctx context.Context, base string, rng *rand.Rand, writer int, pinnedID int64) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	send := func(method, path string, body any) (int, map[string]any) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return 0, nil
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	env := []string{"prod", "dev"}[rng.IntN(2)]
	if rng.IntN(10) == 0 {
		st, _ := send(http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", pinnedID), map[string]any{"spec": map[string]any{"n": rng.IntN(1000)}, "labels": map[string]string{"env": env}})
		return b2i(st == http.StatusOK)
	}
	ty := []string{"Alpha", "Beta"}[rng.IntN(2)]
	name := fmt.Sprintf("w%d-%d", writer, rng.IntN(8))
	st, got := send(http.MethodGet, "/api/v1/resources/by-name/"+ty+"/v1/"+name, nil)
	switch {
	case st == http.StatusNotFound:
		st, _ = send(http.MethodPost, "/api/v1/resources", map[string]any{"name": name, "resource_type_name": ty, "resource_type_version": "v1",
			"spec": map[string]any{"n": rng.IntN(1000)}, "labels": map[string]string{"env": env}})
		return b2i(st == http.StatusCreated)
	case st != http.StatusOK || got["status"] == "deleting": // a deleting one waits for its cleanup
		return 0
	}
	id := int64(got["id"].(float64))
	if rng.IntN(4) == 0 {
		st, _ = send(http.MethodDelete, fmt.Sprintf("/api/v1/resources/%d", id), nil)
		return b2i(st == http.StatusAccepted) // DELETED (PURGED follows the cleanup)
	}
	st, _ = send(http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", id), map[string]any{"spec": map[string]any{"n": rng.IntN(1000)}, "labels": map[string]string{"env": env}})
	return b2i(st == http.StatusOK)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWatchBookmarksOnFreshCluster: on a fresh cluster, before any event
// was published (a namespace and a type take revisions, but events are for
// resources), a watch without a resume point starts with a BOOKMARK, with
// the gateway's default timers, and later bookmarks follow the revisions
// without events up to the list's X-Resource-Version; resuming from such a
// bookmark then delivers the first resource's CREATED.
func TestWatchBookmarksOnFreshCluster(t *testing.T) {
	c := newCluster(t)
	c.startStore("")
	adm := c.startAdmission(c.storeAddrs[0])
	plain := c.startGateway(c.storeAddrs[0], adm) // the default timers: bookmarks every 30 s
	quickAddr := freeAddr(t)
	c.startGatewayAt(quickAddr, c.storeAddrs[0], adm, watchFlags...) // bookmarks every second
	quick := "http://" + quickAddr
	listRevision := func() int64 {
		t.Helper()
		r := do(t, "GET", plain+"/api/v1/resources?limit=1", nil)
		rv, err := strconv.ParseInt(r.header.Get("X-Resource-Version"), 10, 64)
		if r.status != 200 || err != nil {
			t.Fatalf("list: %d %v", r.status, err)
		}
		return rv
	}
	first := func(w *sseConn) sseEvent {
		t.Helper()
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatalf("the watch ended: %v", w.err)
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
		}
		return sseEvent{}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := listRevision()
	w, _, err := dialWatch(ctx, plain+"/api/v1/events", -1, false, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	// The revision the gateway has passed: at most the published one (the
	// gateway reads that at its start and at each bookmark interval).
	if ev := first(w); ev.name != "BOOKMARK" || ev.id > start {
		t.Fatalf("a fresh watch began with %s id %d, want a BOOKMARK at most %d (the list's X-Resource-Version)", ev.name, ev.id, start)
	}

	// Revisions without events: a namespace and a type.
	if r := do(t, "POST", plain+"/api/v1/namespaces", map[string]any{"name": "fresh"}); r.status != 201 {
		t.Fatalf("create namespace: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", plain+"/api/v1/resource-types", map[string]any{"name": "Fresh", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	// The relay passes them within its poll interval (no event wakes it).
	var later int64
	waitFor(t, 10*time.Second, "the published revision to pass the namespace and the type", func() error {
		if later = listRevision(); later < 2 || later <= start {
			return fmt.Errorf("published revision %d (was %d at the start)", later, start)
		}
		return nil
	})
	wq, _, err := dialWatch(ctx, quick+"/api/v1/events?namespace=fresh", -1, false, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer wq.close()
	var bookmark int64
	waitFor(t, 15*time.Second, "a bookmark at the newest revision", func() error {
		ev := first(wq)
		if ev.name != "BOOKMARK" {
			return fmt.Errorf("got %s before any change", ev.name)
		}
		if bookmark = ev.id; bookmark < later {
			return fmt.Errorf("bookmark %d, want %d", bookmark, later)
		}
		return nil
	})
	// Resuming from it: the first resource's CREATED, nothing before.
	rw, status, err := dialWatch(ctx, quick+"/api/v1/events?namespace=fresh", bookmark, false, 64)
	if err != nil {
		t.Fatalf("resume from bookmark %d: %d %v", bookmark, status, err)
	}
	defer rw.close()
	c.startReconciler(c.storeAddrs[0], "Fresh/v1")
	created := do(t, "POST", plain+"/api/v1/resources", map[string]any{"namespace": "fresh", "name": "first", "resource_type_name": "Fresh", "resource_type_version": "v1", "spec": map[string]any{}})
	if created.status != 201 {
		t.Fatalf("create resource: %d %s", created.status, created.body)
	}
	for {
		ev := first(rw)
		if ev.name == "BOOKMARK" {
			continue
		}
		if ev.name != "CREATED" || ev.id <= bookmark || ev.id != int64(created.json(t)["resource_version"].(float64)) {
			t.Fatalf("after resuming from %d: %s id %d", bookmark, ev.name, ev.id)
		}
		break
	}
}
