package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/internal/resource"
)

// inputTestConfig makes the queue input's retries quick.
var inputTestConfig = queueinput.Config{AckWait: 5 * time.Second, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond}

// natsAnswer is a reply or an outcome: status, headers, body.
type natsAnswer struct {
	Status int
	Header nats.Header
	Body   []byte
}

func answerOf(t testing.TB, m *nats.Msg) natsAnswer {
	t.Helper()
	st, err := strconv.Atoi(m.Header.Get(subjects.InputStatusHeader))
	if err != nil {
		t.Fatalf("message without %s: %v %s", subjects.InputStatusHeader, m.Header, m.Data)
	}
	return natsAnswer{Status: st, Header: m.Header, Body: m.Data}
}

// request sends a request-reply message and returns the reply.
func request(t testing.TB, subject, doc string, headers ...string) natsAnswer {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(doc)
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Set(headers[i], headers[i+1])
	}
	reply, err := env.nc.RequestMsg(m, 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return answerOf(t, reply)
}

// withoutRequestID removes request_id from a JSON error body.
func withoutRequestID(t testing.TB, body []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	delete(m, "request_id")
	b, _ := json.Marshal(m)
	return string(b)
}

func gadgetDoc(name string, size int) string {
	return fmt.Sprintf("kind: Resource\ntype: Gadget/v1\nmetadata:\n  name: %s\n  labels: {team: q}\nspec:\n  size: %d\n", name, size)
}

// The request-reply input answers with the HTTP API's status, headers and
// body: the same operation behind both.
func TestInputRequestReply(t *testing.T) {
	gadgetType.Do(func() { createType(t, "Gadget", "v1", gadgetSchema) })

	unchanged(t, func() {
		a := request(t, subjects.InputRequestApply, gadgetDoc("by-nats", 2), subjects.InputDryRunHeader, "true")
		if a.Status != http.StatusCreated || a.Header.Get(HeaderApplyResult) != ApplyCreated || a.Header.Get("Location") != "" {
			t.Fatalf("dry-run apply: %d %v %s", a.Status, a.Header, a.Body)
		}
	})
	a := request(t, subjects.InputRequestApply, gadgetDoc("by-nats", 2), "X-Request-Id", "req-1")
	created := decode[resource.Resource](t, response{Body: a.Body})
	if a.Status != http.StatusCreated || a.Header.Get(HeaderApplyResult) != ApplyCreated || created.Generation != 1 ||
		a.Header.Get("Location") != "/api/v1/resources/"+strconv.FormatInt(created.ID, 10) || a.Header.Get(HeaderRequestID) != "req-1" {
		t.Fatalf("apply: %d %v %s", a.Status, a.Header, a.Body)
	}

	// The same document through HTTP and NATS: the same answer.
	httpBody := map[string]any{"name": "by-nats", "resource_type_name": "Gadget", "resource_type_version": "v1", "labels": map[string]string{"team": "q"}, "spec": map[string]any{"size": 2}}
	h := apply(t, "", httpBody).expect(t, http.StatusOK)
	n := request(t, subjects.InputRequestApply, gadgetDoc("by-nats", 2))
	if n.Status != h.Status || n.Header.Get(HeaderApplyResult) != ApplyUnchanged || h.Header.Get(HeaderApplyResult) != ApplyUnchanged || !bytes.Equal(n.Body, h.Body) {
		t.Fatalf("unchanged: nats %d %s\nhttp %d %s", n.Status, n.Body, h.Status, h.Body)
	}
	httpBody["spec"] = map[string]any{"size": 0}
	h = apply(t, "", httpBody)
	n = request(t, subjects.InputRequestApply, gadgetDoc("by-nats", 0))
	if n.Status != http.StatusBadRequest || n.Status != h.Status || withoutRequestID(t, n.Body) != withoutRequestID(t, h.Body) {
		t.Fatalf("invalid spec: nats %d %s\nhttp %d %s", n.Status, n.Body, h.Status, h.Body)
	}

	// A namespace that does not exist: the HTTP API's answer.
	h = apply(t, "", map[string]any{"namespace": "nowhere", "name": "x", "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
	n = request(t, subjects.InputRequestApply, "kind: Resource\ntype: Gadget/v1\nmetadata: {name: x, namespace: nowhere}\nspec: {size: 1}\n")
	if n.Status != http.StatusNotFound || n.Status != h.Status || withoutRequestID(t, n.Body) != withoutRequestID(t, h.Body) {
		t.Fatalf("missing namespace: nats %d %s\nhttp %d %s", n.Status, n.Body, h.Status, h.Body)
	}

	t.Run("malformed messages get a clear error and write nothing", func(t *testing.T) {
		unchanged(t, func() {
			for _, tc := range []struct {
				doc, code, path string
				headers         []string
			}{
				{doc: "kind: Resource\ntype: Gadget/v1\nmetadata: {name: x\n", code: "malformed_json"},
				{doc: "", code: "malformed_json"},
				{doc: "kind: Resource\ntype: Gadget\nmetadata: {name: Bad_Name}\n", code: "invalid", path: "/metadata/name"},
				{doc: "kind: ResourceType\nmetadata: {name: Gadget}\nversion: v1\nschema: {}\n", code: "invalid", path: "/kind"},
				{doc: gadgetDoc("a", 1) + "---\n" + gadgetDoc("b", 1), code: "invalid"},
				{doc: gadgetDoc("a", 1), code: "invalid", path: "/headers/" + subjects.InputDryRunHeader, headers: []string{subjects.InputDryRunHeader, "maybe"}},
				{doc: "kind: Resource\ntype: Gadget/v1\nmetadata: {name: a}\nspec: {color: \"a\\0b\"}\n", code: "invalid", path: "/spec/color"},
			} {
				a := request(t, subjects.InputRequestApply, tc.doc, tc.headers...)
				e := decode[errorDoc](t, response{Body: a.Body})
				if a.Status != http.StatusBadRequest || e.Code != tc.code || e.Detail == "" || e.RequestID == "" {
					t.Fatalf("%q: %d %s", tc.doc, a.Status, a.Body)
				}
				if tc.path != "" && !strings.Contains(string(a.Body), `"path":"`+tc.path+`"`) {
					t.Fatalf("%q: no path %s in %s", tc.doc, tc.path, a.Body)
				}
			}
		})
	})

	t.Run("delete", func(t *testing.T) {
		a := request(t, subjects.InputRequestDelete, gadgetDoc("by-nats", 2))
		got := decode[resource.Resource](t, response{Body: a.Body})
		if a.Status != http.StatusAccepted || got.ID != created.ID || got.Status != "deleting" {
			t.Fatalf("delete: %d %s", a.Status, a.Body)
		}
		cleanupAndWaitGone(t, got)
		a = request(t, subjects.InputRequestDelete, gadgetDoc("by-nats", 2))
		if a.Status != http.StatusNotFound || decode[errorDoc](t, response{Body: a.Body}).Code != "not_found" {
			t.Fatalf("delete again: %d %s", a.Status, a.Body)
		}
	})
}

// queueClient publishes fire-and-forget messages and reads outcomes and
// dead letters from their streams.
type queueClient struct {
	t  testing.TB
	js jetstream.JetStream
}

func (q queueClient) publish(subject, key, doc string, headers ...string) uint64 {
	q.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(doc)
	if key != "" {
		m.Header.Set(subjects.InputKeyHeader, key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Add(headers[i], headers[i+1])
	}
	ack, err := q.js.PublishMsg(q.t.(*testing.T).Context(), m)
	if err != nil {
		q.t.Fatalf("publish: %v", err)
	}
	return ack.Sequence
}

// outcome waits for the outcome of the message with stream sequence seq
// and key key.
func (q queueClient) outcome(key string, seq uint64) natsAnswer {
	q.t.Helper()
	var found *nats.Msg
	q.scan(subjects.InputOutcomesStream, subjects.InputOutcome(key), func(m jetstream.Msg) bool {
		if m.Headers().Get(subjects.InputSequenceHeader) == strconv.FormatUint(seq, 10) {
			found = &nats.Msg{Header: m.Headers(), Data: m.Data()}
			return true
		}
		return false
	})
	return answerOf(q.t, found)
}

// dead waits for the dead letter of the message with stream sequence seq.
func (q queueClient) dead(seq uint64) *nats.Msg {
	q.t.Helper()
	var found *nats.Msg
	q.scan(subjects.InputDeadStream, subjects.InputDead, func(m jetstream.Msg) bool {
		if m.Headers().Get(subjects.InputSequenceHeader) == strconv.FormatUint(seq, 10) {
			found = &nats.Msg{Header: m.Headers(), Data: m.Data()}
			return true
		}
		return false
	})
	return found
}

// scan reads stream's messages on subject until match accepts one, for at
// most 30 s.
func (q queueClient) scan(stream, subject string, match func(jetstream.Msg) bool) {
	q.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := q.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		q.t.Fatalf("read %s: %v", stream, err)
	}
	for {
		m, err := c.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			q.t.Fatalf("no matching message on %s (%s): %v", subject, stream, err)
		}
		if match(m) {
			return
		}
	}
}

// The fire-and-forget input: an outcome per message on the key's subject;
// the same key and body again replays the outcome; the same key with
// another body is refused, the first one winning; malformed messages get
// an error outcome and a dead letter with the reason, and their key is
// free again.
func TestInputQueue(t *testing.T) {
	gadgetType.Do(func() { createType(t, "Gadget", "v1", gadgetSchema) })
	q := queueClient{t: t, js: env.js}

	s1 := q.publish(subjects.InputQueueApply, "q-key-1", gadgetDoc("queued", 3))
	o1 := q.outcome("q-key-1", s1)
	created := decode[resource.Resource](t, response{Body: o1.Body})
	if o1.Status != http.StatusCreated || o1.Header.Get(HeaderApplyResult) != ApplyCreated || created.Name != "queued" || o1.Header.Get(subjects.InputDuplicateHeader) != "" {
		t.Fatalf("outcome: %d %v %s", o1.Status, o1.Header, o1.Body)
	}

	unchanged(t, func() {
		s2 := q.publish(subjects.InputQueueApply, "q-key-1", gadgetDoc("queued", 3))
		o2 := q.outcome("q-key-1", s2)
		if o2.Status != http.StatusCreated || o2.Header.Get(subjects.InputDuplicateHeader) != "true" || !bytes.Equal(o2.Body, o1.Body) {
			t.Fatalf("duplicate: %d %v %s", o2.Status, o2.Header, o2.Body)
		}
		s3 := q.publish(subjects.InputQueueApply, "q-key-1", gadgetDoc("queued", 4))
		o3 := q.outcome("q-key-1", s3)
		if e := decode[errorDoc](t, response{Body: o3.Body}); o3.Status != http.StatusConflict || e.Code != "idempotency_key_reused" {
			t.Fatalf("reused key: %d %s", o3.Status, o3.Body)
		}
	})

	var bad uint64
	unchanged(t, func() {
		bad = q.publish(subjects.InputQueueApply, "q-key-2", "kind: Resource\ntype: Gadget/v1\nmetadata: {name: [\n")
		o := q.outcome("q-key-2", bad)
		if e := decode[errorDoc](t, response{Body: o.Body}); o.Status != http.StatusBadRequest || e.Code != "malformed_json" {
			t.Fatalf("malformed outcome: %d %s", o.Status, o.Body)
		}
		d := q.dead(bad)
		if !strings.HasPrefix(d.Header.Get(subjects.InputReasonHeader), "malformed: ") || d.Header.Get(subjects.InputKeyHeader) != "q-key-2" ||
			d.Header.Get(subjects.InputSubjectHeader) != subjects.InputQueueApply || !strings.Contains(string(d.Data), "metadata: {name: [") {
			t.Fatalf("dead letter: %v %s", d.Header, d.Data)
		}
		noKey := q.publish(subjects.InputQueueApply, "", gadgetDoc("nokey", 1))
		if d := q.dead(noKey); !strings.Contains(d.Header.Get(subjects.InputReasonHeader), subjects.InputKeyHeader+" is required") {
			t.Fatalf("dead letter without key: %v", d.Header)
		}
		// Two keys (issue 27): refused, not run under the first.
		twoKeys := q.publish(subjects.InputQueueApply, "q-key-4", gadgetDoc("twokeys", 1), subjects.InputKeyHeader, "q-key-5")
		if d := q.dead(twoKeys); !strings.Contains(d.Header.Get(subjects.InputReasonHeader), subjects.InputKeyHeader+" appears 2 times") {
			t.Fatalf("dead letter with two keys: %v", d.Header)
		}
	})
	// The malformed message left its key free.
	fixed := q.publish(subjects.InputQueueApply, "q-key-2", gadgetDoc("queued-2", 1))
	if o := q.outcome("q-key-2", fixed); o.Status != http.StatusCreated {
		t.Fatalf("after a malformed message, the key is free: %d %s", o.Status, o.Body)
	}

	del := q.publish(subjects.InputQueueDelete, "q-key-3", gadgetDoc("queued", 3))
	if o := q.outcome("q-key-3", del); o.Status != http.StatusAccepted {
		t.Fatalf("delete: %d %s", o.Status, o.Body)
	}
}

// Answers a retry may change (a 5xx) are retried with a delay; after
// InputMaxDeliver deliveries the message is dead-lettered with the last
// answer as its outcome. One that succeeds on a retry is recorded.
func TestInputRetries(t *testing.T) {
	createType(t, "Flaky", "v1", `{"type":"object"}`)
	var calls, failFirst atomic.Int64
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= failFirst.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}))
	t.Cleanup(hookSrv.Close)
	register(t, hook("flaky.queue.example.com", "Flaky", hookSrv.URL, "validating", "timeout_seconds", 1))
	q := queueClient{t: t, js: env.js}
	doc := func(name string) string {
		return "kind: Resource\ntype: Flaky/v1\nmetadata: {name: " + name + "}\nspec: {}\n"
	}

	failFirst.Store(2)
	s := q.publish(subjects.InputQueueApply, "flaky-1", doc("third-time"))
	if o := q.outcome("flaky-1", s); o.Status != http.StatusCreated || calls.Load() != 3 {
		t.Fatalf("after two 503s: %d %s (webhook called %d times)", o.Status, o.Body, calls.Load())
	}

	calls.Store(0)
	failFirst.Store(1 << 40)
	s = q.publish(subjects.InputQueueApply, "flaky-2", doc("never"))
	o := q.outcome("flaky-2", s)
	if e := decode[errorDoc](t, response{Body: o.Body}); o.Status != http.StatusServiceUnavailable || e.Code != "webhook_failed" {
		t.Fatalf("given up: %d %s", o.Status, o.Body)
	}
	d := q.dead(s)
	if d.Header.Get(subjects.InputDeliveriesHeader) != strconv.Itoa(subjects.InputMaxDeliver) ||
		!strings.HasPrefix(d.Header.Get(subjects.InputReasonHeader), fmt.Sprintf("gave up after %d deliveries: status 503", subjects.InputMaxDeliver)) {
		t.Fatalf("dead letter: %v", d.Header)
	}
	if calls.Load() != int64(subjects.InputMaxDeliver) {
		t.Fatalf("webhook called %d times, want %d", calls.Load(), subjects.InputMaxDeliver)
	}
	if n := countResources(t, "Flaky"); n != 1 {
		t.Fatalf("%d Flaky resources, want 1", n)
	}
}
