package composerun

import (
	"strings"
	"testing"
	"time"
)

const sample = `
services:
  db:
    image: postgres:16
    healthcheck: {test: [CMD, pg_isready], interval: 2s}
    volumes: ["pgdata:/var/lib/postgresql/data:rw"]
  migrate:
    image: localhost/no8s:x
    restart: "no"
    command: [no8s-store, migrate]
    depends_on: {db: {condition: service_healthy}}
  app:
    image: localhost/no8s:x
    restart: unless-stopped
    command: [no8s-store]
    ports: [{published: 8000, target: 8000}]
    volumes: ["/srv/grants.json:/etc/no8s/grants.json:ro"]
    depends_on:
      migrate: {condition: service_completed_successfully}
      db: {condition: service_healthy}
volumes: {pgdata: {}}
`

func TestParseAndOrder(t *testing.T) {
	f, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	order, err := f.Order()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, " "); got != "db migrate app" {
		t.Fatalf("order %q, want db migrate app", got)
	}
	if s, target, ok := f.PublishedTo(8000); !ok || s != "app" || target != 8000 {
		t.Fatalf("PublishedTo(8000) = %s %d %v", s, target, ok)
	}
	m, err := f.Services["app"].Mounts()
	if err != nil || len(m) != 1 || m[0].Named || !m[0].ReadOnly || m[0].Target != "/etc/no8s/grants.json" {
		t.Fatalf("app mounts %+v, %v", m, err)
	}
	r := &Run{Dir: "/run/x"}
	p := &plan{svc: f.Services["db"]}
	p.mounts, _ = p.svc.Mounts()
	if got := r.hostPath(p, "/var/lib/postgresql/data/pg"); got != "/run/x/volumes/pgdata/pg" {
		t.Fatalf("hostPath: %s", got)
	}
	if got := r.hostPath(p, "/var/lib/postgresql/database"); got != "/var/lib/postgresql/database" {
		t.Fatalf("hostPath of a path beside the mount: %s", got)
	}
}

// TestParseRefuses: what the runner cannot honour fails, naming the
// service.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ edit, want string }{
		{"condition: service_completed_successfully", "condition: service_done"},
		{"test: [CMD, pg_isready]", "test: [CMD-SHELL, pg_isready]"},
		{"restart: unless-stopped", "restart: sometimes"},
	} {
		_, err := Parse([]byte(strings.Replace(sample, c.edit, c.want, 1)))
		if err == nil {
			t.Errorf("%s: parsed", c.want)
		}
	}
	cyclic := strings.Replace(sample, "    image: postgres:16\n", "    image: postgres:16\n    depends_on: {app: {condition: service_started}}\n", 1)
	f, err := Parse([]byte(cyclic))
	if err == nil {
		_, err = f.Order()
	}
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a depends_on cycle: %v", err)
	}
}

func TestRunIDAndRestart(t *testing.T) {
	now := time.Date(2026, 11, 27, 18, 5, 1, 0, time.UTC)
	id := NewRunID(now)
	run, start, ok := RunStart(Prefix + id + "-gateway-2")
	if !ok || run != id || !start.Equal(now) {
		t.Fatalf("RunStart of %s = %s %s %v", id, run, start, ok)
	}
	if _, _, ok := RunStart("no8s-other"); ok {
		t.Fatal("a name the runner did not make parsed")
	}
	for _, c := range []struct {
		policy string
		code   int
		want   bool
	}{{"no", 1, false}, {"", 1, false}, {"always", 0, true}, {"unless-stopped", 137, true}, {"on-failure", 0, false}, {"on-failure:3", 1, true}} {
		if got := restarts(c.policy, c.code); got != c.want {
			t.Errorf("restarts(%q, %d) = %v", c.policy, c.code, got)
		}
	}
}
