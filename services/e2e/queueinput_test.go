package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
)

// The queue publisher is this test binary run again as a separate process
// (TestMain hands it over to runQueuePublisher when queuePublisherEnv is
// set): it publishes the plan's messages to the queue input and prints one
// JSON line per message with its stream sequence.
const (
	queuePublisherEnv = "NO8S_E2E_QUEUE_PUBLISHER" // the NATS URL
	// queueCredsEnv is the publisher's NATS user file, where NATS checks
	// users: a NATS publisher's (`no8s identity issue --nats-publisher`).
	queueCredsEnv = "NO8S_E2E_QUEUE_CREDS"
	queuePlanEnv  = "NO8S_E2E_QUEUE_PLAN" // "unique,duplicates,conflicts,malformed"
)

// Kinds of message in the plan.
const (
	qValid     = "valid"     // a new resource under a new key
	qDuplicate = "duplicate" // a valid message again: same key, same body
	qConflict  = "conflict"  // a key of its own, sent twice with two bodies
	qMalformed = "malformed" // not a usable document
)

// queueMsg is one message of the plan, as the publisher reports it.
type queueMsg struct {
	Seq  uint64 `json:"seq"`
	Key  string `json:"key"`
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
	N    int    `json:"n"`
}

// queuePlan builds the messages: unique valid ones (each name once),
// duplicates of some of them, conflicting pairs and malformed ones,
// shuffled with a fixed seed.
func queuePlan(unique, dups, conflicts, malformed int) []queueMsg {
	var plan []queueMsg
	for i := range unique {
		plan = append(plan, queueMsg{Key: fmt.Sprintf("k-%d", i), Kind: qValid, Name: fmt.Sprintf("r-%d", i), N: i})
	}
	for i := range dups {
		j := (i * 7) % unique
		plan = append(plan, queueMsg{Key: fmt.Sprintf("k-%d", j), Kind: qDuplicate, Name: fmt.Sprintf("r-%d", j), N: j})
	}
	for i := range conflicts {
		for v := range 2 {
			plan = append(plan, queueMsg{Key: fmt.Sprintf("c-%d", i), Kind: qConflict, Name: fmt.Sprintf("cr-%d", i), N: 1000000 + v})
		}
	}
	for i := range malformed {
		plan = append(plan, queueMsg{Key: fmt.Sprintf("bad-%d", i), Kind: qMalformed, N: i})
	}
	rng := rand.New(rand.NewPCG(18, 18))
	rng.Shuffle(len(plan), func(a, b int) { plan[a], plan[b] = plan[b], plan[a] })
	return plan
}

// body is a message's document.
func (m queueMsg) body() string {
	if m.Kind != qMalformed {
		return fmt.Sprintf("kind: Resource\ntype: Queued/v1\nmetadata:\n  name: %s\nspec:\n  n: %d\n", m.Name, m.N)
	}
	switch m.N % 5 {
	case 0:
		return "kind: Resource\ntype: Queued/v1\nmetadata: {name: [\n" // not YAML
	case 1:
		return "kind: Resource\ntype: Queued/v1\nspec: {n: 1}\n" // no name
	case 2:
		return "kind: Gadget\nmetadata: {name: x}\n" // unknown kind
	case 3:
		return fmt.Sprintf("kind: Resource\ntype: Queued\nmetadata: {name: Bad_%d}\nspec: 7\n", m.N) // type, name and spec wrong
	}
	return fmt.Sprintf(`{"kind": "Resource", "type": "Queued/v1", "metadata": {"name": "dup-key-%d", "name": "x"}}`, m.N) // a key twice
}

// runQueuePublisher is the publisher process's main.
func runQueuePublisher(url string) int {
	var u, d, c, m int
	if _, err := fmt.Sscanf(os.Getenv(queuePlanEnv), "%d,%d,%d,%d", &u, &d, &c, &m); err != nil {
		fmt.Fprintln(os.Stderr, "plan:", err)
		return 1
	}
	var opts []nats.Option
	if creds := os.Getenv(queueCredsEnv); creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(512))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The parent's gateways' token: start passes its file to every process.
	tb, err := os.ReadFile(os.Getenv("NO8S_BOOTSTRAP_TOKEN_FILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "admin token:", err)
		return 1
	}
	token := strings.TrimSpace(string(tb))
	plan := queuePlan(u, d, c, m)
	futures := make([]jetstream.PubAckFuture, len(plan))
	for i, q := range plan {
		msg := nats.NewMsg(subjects.InputQueueApply)
		msg.Header.Set(subjects.InputKeyHeader, q.Key)
		msg.Header.Set("Authorization", "Bearer "+token)
		msg.Data = []byte(q.body())
		// A loaded machine acks slowly: wait for room rather than fail
		// after the client's default 200 ms.
		if futures[i], err = js.PublishMsgAsync(msg, jetstream.WithStallWait(30*time.Second)); err != nil {
			fmt.Fprintln(os.Stderr, "publish:", err)
			return 1
		}
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			plan[i].Seq = ack.Sequence
		case err := <-f.Err():
			fmt.Fprintln(os.Stderr, "publish:", err)
			return 1
		case <-time.After(time.Minute):
			fmt.Fprintln(os.Stderr, "publish: no ack within a minute")
			return 1
		}
		line, _ := json.Marshal(plan[i])
		_, _ = out.Write(append(line, '\n'))
	}
	return 0
}

// queueOutcome is an outcome read back from NO8S_INPUT_OUTCOMES.
type queueOutcome struct {
	status int
	dup    bool
	key    string
	body   string
}

// TestQueueInputKill9 publishes apply messages from a separate process to
// two gateways' queue input: unique resources, duplicates (same key, same
// body), conflicting pairs (same key, two bodies) and malformed messages,
// and kills one gateway with SIGKILL midway. Afterwards every valid
// resource exists exactly once with its body's spec, every message has
// exactly one outcome (duplicates replay their key's outcome; of each
// conflicting pair exactly one wins and the other gets 409), every
// malformed one got a 400 outcome and is in the dead-letter stream with
// the reason, and the work queue is empty: nothing lost. make test runs
// 10,000 messages (8,300 unique, 1,000 duplicates, 100 conflicting pairs,
// 500 malformed) in about 30 s.
func TestQueueInputKill9(t *testing.T) {
	unique, dups, conflicts, malformed := 8300, 1000, 100, 500
	total := unique + dups + 2*conflicts + malformed
	c := newCluster(t)
	c.startStore("")
	adm := c.startAdmission(c.storeAddrs[0])
	flags := []string{"--input-ack-wait", "3s", "--input-retry-delay", "200ms", "--outbound-allow", "loopback,private"}
	victim := c.startGatewayAt(freeAddr(t), c.storeAddrs[0], adm, flags...)
	survivorAddr := freeAddr(t)
	c.startGatewayAt(survivorAddr, c.storeAddrs[0], adm, flags...)
	base := "http://" + survivorAddr
	if r := do(t, "POST", base+"/api/v1/resource-types", `{"name":"Queued","version":"v1","schema":{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}}`); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Queued/v1")
	js, _ := c.jetstream()
	// Both gateways have set the input up before anything is published.
	waitFor(t, 20*time.Second, "queue input consumer", func() error {
		_, err := js.Consumer(t.Context(), subjects.InputStream, subjects.InputConsumer)
		return err
	})

	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	pub := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	pub.Env = append(append(os.Environ(), bootstrapEnv()...), queuePublisherEnv+"="+c.natsURL, fmt.Sprintf("%s=%d,%d,%d,%d", queuePlanEnv, unique, dups, conflicts, malformed))
	if c.natsConf != "" {
		pub.Env = append(pub.Env, queueCredsEnv+"="+c.natsUserFile("--nats-publisher", "orders"))
	}
	var stderr strings.Builder
	pub.Stderr = &stderr
	stdout, err := pub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	var plan []queueMsg
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var m queueMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("publisher output %q: %v", sc.Text(), err)
		}
		plan = append(plan, m)
	}
	if err := pub.Wait(); err != nil || len(plan) != total {
		t.Fatalf("publisher: %v, %d of %d messages\n%s", err, len(plan), total, stderr.String())
	}
	published := time.Since(start)

	// Kill one gateway once about half the outcomes are out.
	outcomesAt := func() uint64 {
		s, err := js.Stream(t.Context(), subjects.InputOutcomesStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	waitFor(t, 2*time.Minute, "half the outcomes", func() error {
		if n := outcomesAt(); n < uint64(total/2) {
			return fmt.Errorf("%d outcomes", n)
		}
		return nil
	})
	atKill := outcomesAt()
	victim.kill9()
	t.Logf("published %d messages from a separate process in %v; killed a gateway (SIGKILL) at %d outcomes", total, published.Round(time.Millisecond), atKill)
	if atKill >= uint64(total) {
		t.Fatalf("the kill came after the last outcome (%d): not midway", atKill)
	}

	// Every message gets its outcome.
	outcomes := map[uint64][]queueOutcome{}
	oc, err := js.OrderedConsumer(t.Context(), subjects.InputOutcomesStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(outcomes) < total {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages have an outcome after 2 minutes", len(outcomes), total)
		}
		batch, err := oc.FetchNoWait(500)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			h := m.Headers()
			seq, _ := strconv.ParseUint(h.Get(subjects.InputSequenceHeader), 10, 64)
			st, _ := strconv.Atoi(h.Get(subjects.InputStatusHeader))
			outcomes[seq] = append(outcomes[seq], queueOutcome{status: st, dup: h.Get(subjects.InputDuplicateHeader) == "true", key: h.Get(subjects.InputKeyHeader), body: string(m.Data())})
		}
		if n == 0 {
			time.Sleep(50 * time.Millisecond) // nothing new yet: poll again
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d outcomes %v after the first publish (%.0f messages/s)", len(outcomes), elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())

	dead := map[uint64]string{}
	dc, err := js.OrderedConsumer(t.Context(), subjects.InputDeadStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		batch, err := dc.FetchNoWait(500)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			seq, _ := strconv.ParseUint(m.Headers().Get(subjects.InputSequenceHeader), 10, 64)
			if _, twice := dead[seq]; twice {
				t.Errorf("message %d dead-lettered twice", seq)
			}
			dead[seq] = m.Headers().Get(subjects.InputReasonHeader)
		}
		if n == 0 {
			break
		}
	}

	// Check each message against its outcome.
	byKey := map[string][]queueMsg{}
	for _, m := range plan {
		byKey[m.Key] = append(byKey[m.Key], m)
		o := outcomes[m.Seq]
		if len(o) != 1 {
			t.Fatalf("message %d (%s %s) has %d outcomes", m.Seq, m.Kind, m.Key, len(o))
		}
		if o[0].key != m.Key {
			t.Fatalf("message %d: outcome for key %q, want %q", m.Seq, o[0].key, m.Key)
		}
		reason, isDead := dead[m.Seq]
		switch m.Kind {
		case qMalformed:
			if o[0].status != 400 || !strings.Contains(o[0].body, `"detail"`) {
				t.Fatalf("malformed message %d: outcome %d %s", m.Seq, o[0].status, o[0].body)
			}
			if !isDead || !strings.HasPrefix(reason, "malformed: ") {
				t.Fatalf("malformed message %d: dead letter %v %q", m.Seq, isDead, reason)
			}
		default:
			if isDead {
				t.Fatalf("valid message %d (%s) dead-lettered: %s", m.Seq, m.Kind, reason)
			}
		}
	}
	if len(dead) != malformed {
		t.Fatalf("%d dead letters, want %d", len(dead), malformed)
	}
	for key, msgs := range byKey {
		switch {
		case strings.HasPrefix(key, "k-"):
			// One resource, once; every copy answered the same, exactly
			// one of them not as a replay.
			first := 0
			for _, m := range msgs {
				o := outcomes[m.Seq][0]
				if o.status != 201 && o.status != 200 {
					t.Fatalf("%s (message %d): %d %s", key, m.Seq, o.status, o.body)
				}
				if !o.dup {
					first++
				}
			}
			if first != 1 {
				t.Fatalf("%s: %d of %d copies were run, want 1", key, first, len(msgs))
			}
		case strings.HasPrefix(key, "c-"):
			wins, refused := 0, 0
			for _, m := range msgs {
				switch o := outcomes[m.Seq][0]; {
				case o.status == 201 || o.status == 200:
					wins++
					if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'Queued' AND name = $1 AND (spec->>'n')::int = $2`, m.Name, m.N); n != 1 {
						t.Fatalf("%s: the winner's spec n=%d is not stored", key, m.N)
					}
				case o.status == 409 && strings.Contains(o.body, "idempotency_key_reused"):
					refused++
				default:
					t.Fatalf("%s (message %d): %d %s", key, m.Seq, o.status, o.body)
				}
			}
			if wins != 1 || refused != 1 {
				t.Fatalf("%s: %d won, %d refused; want 1 and 1", key, wins, refused)
			}
		}
	}

	// Every valid resource exists exactly once, with its body's spec.
	if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'Queued'`); n != unique+conflicts {
		t.Fatalf("%d Queued resources, want %d", n, unique+conflicts)
	}
	if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'Queued' AND name = 'r-' || (spec->>'n')`); n != unique {
		t.Fatalf("%d resources carry their message's spec, want %d", n, unique)
	}
	if n := c.count(`SELECT count(DISTINCT name) FROM resources WHERE resource_type_name = 'Queued'`); n != unique+conflicts {
		t.Fatalf("%d distinct names", n)
	}
	// Nothing is left in the work queue.
	s, err := js.Stream(t.Context(), subjects.InputStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "an empty work queue", func() error {
		info, err := s.Info(t.Context())
		if err != nil {
			return err
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("%d messages left in %s", info.State.Msgs, subjects.InputStream)
		}
		return nil
	})
}
