package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestHttpSourcePeerErrors is issue 26's scope 5 with real processes: an
// HttpSource pointed at a 500 page whose JSON body carries a secret, and
// one pointed at the NATS port (a peer that is not HTTP): their status,
// Events and registry-sync's log show a summary (status, content type,
// size) and never the peer's bytes.
func TestHttpSourcePeerErrors(t *testing.T) {
	c := newTenantCluster(t)
	sync := c.startSync("a")
	c.waitSyncLeads()
	const leak = "internal-7f3a9c0e5d2b"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, `{"error":"boom","secret":%q}`, leak)
	}))
	t.Cleanup(srv.Close)
	natsHTTP := "http://" + strings.TrimPrefix(c.natsURL, "nats://") + "/"
	for _, s := range []struct {
		name, url, reason, want string
		absent                  []string
	}{
		{"page500", srv.URL + "/items", "HTTPError", "500 Internal Server Error (application/json, 49 bytes)", []string{leak, "boom"}},
		{"natsport", natsHTTP, "SourceUnreachable", "the peer's answer is not HTTP", []string{"server_id", "max_payload"}},
	} {
		body := httpSourceBody(s.name, s.url)
		delete(body["spec"].(map[string]any), "headers") // no credential: the peers' answers are the point
		src := c.create(body)
		id := src["id"].(float64)
		waitSourceSynced(t, c.base, id, "False", s.reason, nil)
		_, syn := sourceStatus(t, c.base, id)
		msg := fmt.Sprint(syn["message"])
		if !strings.Contains(msg, s.want) {
			t.Fatalf("%s: Synced message %q, want %q", s.name, msg, s.want)
		}
		t.Logf("%s: %s", s.name, msg)
		r := do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", c.base, int64(id)), nil)
		evs := do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/event-records", c.base, int64(id)), nil)
		logBytes, err := os.ReadFile(sync.log.Name())
		if err != nil {
			t.Fatal(err)
		}
		for where, b := range map[string][]byte{"resource": r.body, "Events": evs.body, "registry-sync log": logBytes} {
			for _, a := range s.absent {
				if strings.Contains(string(b), a) {
					t.Errorf("%s: %s shows %q", s.name, where, a)
				}
			}
		}
	}
}
