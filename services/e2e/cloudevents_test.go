package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// natsCLI finds the nats CLI: $NO8S_NATS_CLI, or the repo's bin/ (make
// natscli, a dependency of make test).
func natsCLI(t *testing.T) string {
	if p := os.Getenv("NO8S_NATS_CLI"); p != "" {
		return p
	}
	p, err := filepath.Abs("../../bin/nats")
	if err == nil {
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("no nats CLI at %s: run `make natscli` or set NO8S_NATS_CLI (%v)", p, err)
	return ""
}

// TestEventsCarryCloudEvents shows the third-party contract of the event
// stream (docs/events-contract.md): a plain NATS subscriber, the nats CLI with no
// knowledge of our protobuf, reads each event's CloudEvents attributes from
// its headers: the type of every change of a resource (created, modified,
// deleted), its id (the revision, also the Nats-Msg-Id), source, subject
// and time, beside the stream identity headers.
func TestEventsCarryCloudEvents(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	if r := do(t, "POST", base+"/api/v1/resource-types", `{"name":"Routed","version":"v1","schema":{"type":"object"}}`); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Routed/v1")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args := []string{"--server", c.natsURL}
	if c.natsConf != "" { // as the documented NATS reader
		args = append(args, "--creds", c.natsUserFile("--nats-reader", "audit"))
	}
	sub := exec.CommandContext(ctx, natsCLI(t), append(args, "sub", "no8s.events.>", "--count", "3", "--headers-only")...)
	out, err := sub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sub.Stderr = sub.Stdout
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(out)
	// The subscription is live once the CLI says so.
	for {
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("nats sub: %v", err)
		}
		if strings.Contains(line, "Subscribing on no8s.events.>") {
			break
		}
	}

	r := do(t, "POST", base+"/api/v1/resources", `{"name":"routed-1","resource_type_name":"Routed","resource_type_version":"v1","spec":{"a":1}}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	res := r.json(t)
	id := strconv.FormatInt(int64(res["id"].(float64)), 10)
	created := int64(res["resource_version"].(float64))
	mod := do(t, "PATCH", base+"/api/v1/resources/"+id, `{"spec":{"a":2}}`)
	if mod.status != 200 {
		t.Fatalf("patch: %d %s", mod.status, mod.body)
	}
	if d := do(t, "DELETE", base+"/api/v1/resources/"+id, nil); d.status != 202 {
		t.Fatalf("delete: %d %s", d.status, d.body)
	}

	rest, err := io.ReadAll(lines)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Wait(); err != nil {
		t.Fatalf("nats sub: %v\n%s", err, rest)
	}
	// One block of headers per message, as the CLI prints them.
	var events []map[string]string
	for line := range strings.Lines(string(rest)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[#") {
			events = append(events, map[string]string{})
			continue
		}
		if k, v, ok := strings.Cut(line, ": "); ok && len(events) > 0 {
			events[len(events)-1][k] = v
		}
	}
	if len(events) != 3 {
		t.Fatalf("the nats CLI read %d events, want 3:\n%s", len(events), rest)
	}
	wantTypes := []string{"io.no8s.resource.created", "io.no8s.resource.modified", "io.no8s.resource.deleted"}
	for i, ev := range events {
		t.Logf("event %d as the nats CLI read it: %v", i+1, ev)
		if ev["ce-type"] != wantTypes[i] {
			t.Fatalf("event %d: ce-type %q, want %q", i+1, ev["ce-type"], wantTypes[i])
		}
		if ev["ce-specversion"] != "1.0" || ev["ce-subject"] != "Routed/v1/default/routed-1" ||
			!strings.HasPrefix(ev["ce-source"], "/no8s/stores/") || ev["ce-source"] != "/no8s/stores/"+ev["No8s-Store-Id"] ||
			ev["ce-id"] != ev["Nats-Msg-Id"] || ev["ce-id"] != strconv.FormatInt(created+int64(i), 10) ||
			ev["content-type"] != "application/protobuf; proto=no8s.events.v1.Event" || ev["No8s-Stream-Base"] == "" {
			t.Fatalf("event %d headers: %v", i+1, ev)
		}
		if at, err := time.Parse(time.RFC3339Nano, ev["ce-time"]); err != nil || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
			t.Fatalf("event %d: ce-time %q: %v", i+1, ev["ce-time"], err)
		}
	}
}
