package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/natsembed"
)

// syncBuffer is a log sink a test reads while the recorder writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines decodes the JSON lines of a log.
func lines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestEntryIsNilSafeAndMerges(t *testing.T) {
	var nilEntry *audit.Entry
	nilEntry.SetVerb("create")
	nilEntry.SetObject(audit.Object{Name: "x"})
	nilEntry.Deny("no")
	if st := nilEntry.State(); st != (audit.State{}) {
		t.Fatalf("nil entry state %+v", st)
	}
	if audit.EntryFrom(t.Context()) != nil {
		t.Fatal("an entry in a bare context")
	}
	e := audit.NewEntry()
	ctx := audit.WithEntry(t.Context(), e)
	audit.EntryFrom(ctx).SetObject(audit.Object{Kind: "Resource", ID: "7"})
	audit.EntryFrom(ctx).SetObject(audit.Object{Name: "db"})
	audit.EntryFrom(ctx).Deny("first")
	audit.EntryFrom(ctx).Deny("second")
	st := e.State()
	if st.Object != (audit.Object{Kind: "Resource", ID: "7", Name: "db"}) || !st.Denied || st.Reason != "first" {
		t.Fatalf("state %+v", st)
	}
	// The layers' object wins over the route's; the route fills the gaps.
	r := audit.Record{Status: http.StatusNotFound, Verb: "delete", Object: audit.Object{Kind: "Resource", ID: "8", Type: "Db"}}.Complete(st)
	if r.Outcome != audit.Denied || r.Reason != "first" || r.Object != (audit.Object{Kind: "Resource", ID: "7", Name: "db", Type: "Db"}) || r.Verb != "delete" {
		t.Fatalf("completed %+v", r)
	}
	for status, want := range map[int]audit.Outcome{200: audit.Succeeded, 201: audit.Succeeded, 304: audit.Succeeded, 400: audit.Failed, 401: audit.Denied, 403: audit.Denied, 404: audit.Failed, 503: audit.Failed} {
		if got := (audit.Record{Status: status, Reason: "detail"}).Complete(audit.State{}); got.Outcome != want || (want != audit.Denied) != (got.Reason == "") {
			t.Errorf("status %d: %s %q, want %s", status, got.Outcome, got.Reason, want)
		}
	}
	if got := (audit.Record{Status: 403, Reason: strings.Repeat("x", 1000)}).Complete(audit.State{}); len(got.Reason) > 256 {
		t.Errorf("reason of %d bytes", len(got.Reason))
	}
}

func TestRecordsAreJSONLinesTaggedAudit(t *testing.T) {
	var buf syncBuffer
	r := audit.New(audit.Config{Log: &buf}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	r.Record(ctx, audit.Record{Source: audit.SourceHTTP, RequestID: "r1", Verb: "create", Status: 201, Outcome: audit.Succeeded,
		User:   audit.Identity{Username: "alice", Groups: []string{"dev"}, AuthMethod: authn.MethodToken, TokenID: "tid"},
		Object: audit.Object{Kind: "Resource", Type: "Db", Version: "v1", Namespace: "default", Name: "db", ID: "1"}, Method: "POST", Route: "/api/v1/resources"})
	r.Record(ctx, audit.Record{Source: audit.SourceNATS, RequestID: "r2", Verb: "apply", Status: 401, Outcome: audit.Denied, Reason: "unknown API token"})
	cancel() // the drain writes what is queued
	<-done
	got := lines(t, buf.String())
	if len(got) != 2 {
		t.Fatalf("%d lines: %s", len(got), buf.String())
	}
	first := got[0]
	for k, want := range map[string]any{"log": "audit", "source": "http", "request_id": "r1", "trace_id": "", "verb": "create",
		"status": 201.0, "outcome": "succeeded", "method": "POST", "route": "/api/v1/resources"} {
		if first[k] != want {
			t.Errorf("%s = %v, want %v", k, first[k], want)
		}
	}
	if u := first["user"].(map[string]any); u["username"] != "alice" || u["auth_method"] != "token" || u["token_id"] != "tid" {
		t.Errorf("user %v", u)
	}
	if o := first["object"].(map[string]any); o["kind"] != "Resource" || o["type"] != "Db" || o["namespace"] != "default" || o["id"] != "1" {
		t.Errorf("object %v", o)
	}
	if _, err := time.Parse(time.RFC3339Nano, first["time"].(string)); err != nil {
		t.Errorf("time %v", first["time"])
	}
	if got[1]["outcome"] != "denied" || got[1]["reason"] != "unknown API token" || got[1]["source"] != "nats" {
		t.Errorf("second %v", got[1])
	}
	// After Run returned, records are dropped, not queued for nobody.
	r.Record(t.Context(), audit.Record{RequestID: "late"})
	if r.Dropped() != 1 {
		t.Errorf("dropped %d after the stop, want 1", r.Dropped())
	}
}

func TestAFullQueueDropsCountsAndWarns(t *testing.T) {
	var buf, logBuf syncBuffer
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	r := audit.New(audit.Config{Log: &buf, QueueSize: 2}, log)
	// Nobody runs the recorder yet: Record must not block.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5 {
			r.Record(t.Context(), audit.Record{RequestID: "r" + string(rune('0'+i)), Outcome: audit.Succeeded, Status: 200})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked on a full queue")
	}
	if r.Dropped() != 3 {
		t.Fatalf("dropped %d, want 3", r.Dropped())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = r.Run(ctx) // drains the two queued records, warns of the three dropped
	if got := lines(t, buf.String()); len(got) != 2 || got[0]["request_id"] != "r0" || got[1]["request_id"] != "r1" {
		t.Fatalf("log %s", buf.String())
	}
	if !strings.Contains(logBuf.String(), `"dropped":3`) || !strings.Contains(logBuf.String(), "audit records dropped") {
		t.Fatalf("no warning with the count: %s", logBuf.String())
	}
	if audit.New(audit.Config{}, nil) != nil {
		t.Fatal("a recorder without sinks")
	}
	var none *audit.Recorder
	none.Record(t.Context(), audit.Record{})
	if err := none.Run(t.Context()); err != nil || none.Dropped() != 0 {
		t.Fatal("nil recorder")
	}
}

func TestAnHTTPRecordHoldsNoSecret(t *testing.T) {
	_, _, real, err := authn.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	id, secret, err := authn.ParseToken(real)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range []string{"Bearer no8s_x_SECRET", "Bearer " + real, "Basic U0VDUkVUOlNFQ1JFVA==", "Bearer SECRET"} {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/events?access_token=SECRET&dry_run=true&x="+secret, strings.NewReader(`{"password":"SECRET"}`))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Cookie", "session=SECRET")
		req.Header.Set("X-Api-Key", "SECRET")
		rec := audit.HTTPRecord(req, "/api/v1/events")
		rec = rec.Complete(audit.State{})
		rec.User = audit.IdentityOf(&authn.Principal{Username: "alice", Method: authn.MethodToken, TokenID: id}, rec.User)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("SECRET")) || bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("access_token")) {
			t.Fatalf("%s: a secret in the record: %s", auth, b)
		}
		if rec.Route != "/api/v1/events" || rec.Method != http.MethodGet || rec.SourceAddress != "192.0.2.1" || !rec.DryRun {
			t.Errorf("record %+v", rec)
		}
	}
	req := httptest.NewRequest(http.MethodDelete, "/api/v1/tokens/x", nil)
	req.Header.Set("Authorization", "Bearer "+real)
	if got := audit.HTTPRecord(req, "/api/v1/tokens/:id"); got.User.TokenID != id {
		t.Errorf("the presented token's id: %q, want %q", got.User.TokenID, id)
	}
	// A token document's value is never read from an answer.
	o := audit.AnswerObject("Token", []byte(`{"id":"`+id+`","name":"ci","owner":"alice","value":"`+real+`"}`))
	if o != (audit.Object{ID: id, Name: "ci"}) {
		t.Errorf("token answer %+v", o)
	}
}

func TestVerbsAndObjectsOfRoutes(t *testing.T) {
	for _, c := range []struct{ method, route, verb string }{
		{"POST", "/api/v1/resources", "create"},
		{"POST", "/api/v1/resources/apply", "apply"},
		{"PUT", "/api/v1/resources/:id", "update"},
		{"PATCH", "/api/v1/resources/:id", "patch"},
		{"DELETE", "/api/v1/resources/:id", "delete"},
		{"PUT", "/api/v1/resources/:id/finalizers", "update-finalizers"},
		{"POST", "/api/v1/resources/:id/reconcile", "reconcile"},
		{"POST", "/api/v1/resources/:id/event-records", "record-event"},
		{"POST", "/api/v1/tokens", "create"},
		{"DELETE", "/api/v1/tokens/:id", "revoke"},
		{"GET", "/api/v1/tokens", "list"},
		{"GET", "/api/v1/resources/:id", "get"},
		{"GET", "/api/v1/events", "watch"},
		{"GET", "/api/v1/resources/:id/events", "watch"},
		{"POST", "", "create"},
	} {
		if got := audit.VerbOf(c.method, c.route); got != c.verb {
			t.Errorf("%s %s: %q, want %q", c.method, c.route, got, c.verb)
		}
	}
	params := map[string]string{"id": "42", "name": "team-a", "type": "Db", "version": "v1"}
	param := func(k string) string { return params[k] }
	for route, want := range map[string]audit.Object{
		"/api/v1/resources/:id":                          {Kind: "Resource", ID: "42"},
		"/api/v1/resources/by-name/:type/:version/:name": {Kind: "Resource", Type: "Db", Version: "v1", Name: "team-a"},
		"/api/v1/namespaces/:name":                       {Kind: "Namespace", Name: "team-a"},
		"/api/v1/tokens":                                 {Kind: "Token"},
		"/api/v1/admission-webhooks/:id":                 {Kind: "AdmissionWebhook", ID: "42"},
		"/api/v1/resource-types/:id":                     {Kind: "ResourceType", ID: "42"},
		"/healthz":                                       {},
		"":                                               {},
	} {
		if got := audit.RouteObject(route, param); got != want {
			t.Errorf("%s: %+v, want %+v", route, got, want)
		}
	}
	if got := audit.AnswerObject("Resource", []byte(`{"id":7,"namespace":"default","name":"db","resource_type_name":"Db","resource_type_version":"v1","spec":{"password":"SECRET"}}`)); got != (audit.Object{ID: "7", Namespace: "default", Name: "db", Type: "Db", Version: "v1"}) {
		t.Errorf("resource answer %+v", got)
	}
	if got := audit.AnswerObject("ResourceType", []byte(`{"id":3,"name":"Db","version":"v2"}`)); got != (audit.Object{ID: "3", Name: "Db", Version: "v2"}) {
		t.Errorf("type answer %+v", got)
	}
	if got := audit.AnswerObject("Resource", []byte(`not json`)); got != (audit.Object{}) {
		t.Errorf("non-JSON answer %+v", got)
	}
}

func TestRecordsArePublishedOnTheAuditStream(t *testing.T) {
	ns, err := natsembed.Start(t.TempDir(), -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	r := audit.New(audit.Config{Log: &buf, JetStream: js, Stream: audit.StreamConfig{MaxAge: time.Hour, MaxBytes: 1 << 20}}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	outcomes := []audit.Outcome{audit.Succeeded, audit.Denied, audit.Failed, audit.Succeeded}
	for i, o := range outcomes {
		r.Record(ctx, audit.Record{RequestID: "req-" + string(rune('a'+i)), Outcome: o, Status: 200})
	}
	cancel()
	<-done
	st, err := js.Stream(t.Context(), subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(outcomes)) || info.Config.MaxAge != time.Hour || info.Config.MaxBytes != 1<<20 || info.Config.Subjects[0] != subjects.AuditAll {
		t.Fatalf("stream %+v %+v", info.Config, info.State)
	}
	for i, o := range outcomes {
		m, err := st.GetMsg(t.Context(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		var rec audit.Record
		if err := json.Unmarshal(m.Data, &rec); err != nil {
			t.Fatal(err)
		}
		if m.Subject != subjects.Audit(string(o)) || rec.Outcome != o || rec.Log != audit.LogTag || rec.RequestID != "req-"+string(rune('a'+i)) {
			t.Errorf("message %d: %s %+v", i+1, m.Subject, rec)
		}
	}
	if got := len(lines(t, buf.String())); got != len(outcomes) {
		t.Errorf("%d log lines, want %d", got, len(outcomes))
	}
}

func TestOpenLogAndSetUser(t *testing.T) {
	if w, err := audit.OpenLog(audit.LogNone); w != nil || err != nil {
		t.Fatalf("none: %v %v", w, err)
	}
	if w, err := audit.OpenLog(audit.LogStderr); w == nil || err != nil || w.Close() != nil {
		t.Fatalf("stderr: %v %v", w, err)
	}
	path := t.TempDir() + "/audit.log"
	for range 2 {
		w, err := audit.OpenLog(path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte("{}\n"))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "{}\n{}\n" {
		t.Fatalf("appended: %q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	e := audit.NewEntry()
	e.SetUser(audit.Identity{Username: "alice"})
	if r := (audit.Record{Status: 200, User: audit.Identity{Username: "other"}}).Complete(e.State()); r.User.Username != "alice" {
		t.Fatalf("user %+v", r.User)
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSinkFailuresAreWarnedOfInBulk(t *testing.T) {
	var logBuf syncBuffer
	r := audit.New(audit.Config{Log: failingWriter{}}, slog.New(slog.NewJSONHandler(&logBuf, nil)))
	for range 100 {
		r.Record(t.Context(), audit.Record{Outcome: audit.Succeeded})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = r.Run(ctx)
	total, warnings := 0.0, 0
	for _, l := range lines(t, logBuf.String()) {
		if l["msg"] == "audit records not written" {
			warnings++
			total += l["records"].(float64)
			if l["sink"] != "log" || !strings.Contains(l["error"].(string), "disk full") {
				t.Errorf("warning %v", l)
			}
		}
	}
	if total != 100 || warnings > 2 {
		t.Fatalf("%d warnings of %v records, want at most 2 of 100: %s", warnings, total, logBuf.String())
	}
}
