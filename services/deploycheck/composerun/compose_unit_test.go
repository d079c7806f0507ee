package composerun

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s/services/deploycheck/imagecheck"
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

// TestPlanMountsAndArgs: the longest mount target wins (a file bound
// inside a mounted volume), and a --flag=/path argument is mapped as a
// path is.
func TestPlanMountsAndArgs(t *testing.T) {
	r := &Run{Dir: "/run/x"}
	p := &plan{svc: &Service{Name: "nats"}, mounts: []Mount{
		{Source: "nats-auth", Target: "/etc/nats", Named: true},
		{Source: "/src/deploy/nats/nats-server.conf", Target: "/etc/nats/nats-server.conf", ReadOnly: true},
		{Source: "/src/grants", Target: "/etc/nats/grants/"},
	}}
	for in, want := range map[string]string{
		"/etc/nats/nats-server.conf":  "/src/deploy/nats/nats-server.conf",
		"/etc/nats/no8s-auth.conf":    "/run/x/volumes/nats-auth/no8s-auth.conf",
		"/etc/nats":                   "/run/x/volumes/nats-auth",
		"/etc/nats/grants/a.json":     "/src/grants/a.json",
		"/etc/natsy":                  "/etc/natsy",
		"/etc/nats/nats-server.confx": "/run/x/volumes/nats-auth/nats-server.confx",
	} {
		if got := r.hostPath(p, in); got != want {
			t.Errorf("hostPath(%s) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"--ca-dir=/etc/nats/x":  "--ca-dir=/run/x/volumes/nats-auth/x",
		"--ca-dir":              "--ca-dir",
		"/etc/nats/x":           "/run/x/volumes/nats-auth/x",
		"--types=Tenant/v1":     "--types=Tenant/v1",
		"--reconciler=a=B/v1":   "--reconciler=a=B/v1",
		"ensure":                "ensure",
		"--nats-config=/other/": "--nats-config=/other/",
	} {
		if got := r.hostArg(p, in); got != want {
			t.Errorf("hostArg(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestPlanNATSConfig: -c's file is read through the mounts, its absolute
// paths mapped, and its includes linked beside the staged copy.
func TestPlanNATSConfig(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(conf, []byte("port: 4222\njetstream {\n  store_dir: /data\n}\n\ninclude ./no8s-auth.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Run{Dir: dir, cfg: Config{VolumesDir: filepath.Join(dir, "volumes")}}
	p := &plan{svc: &Service{Name: "nats"}, mounts: []Mount{
		{Source: "nats-auth", Target: "/etc/nats", Named: true},
		{Source: conf, Target: "/etc/nats/nats-server.conf"},
		{Source: "natsdata", Target: "/data", Named: true},
	}}
	staged, err := r.stageNATSConfig(p, "/etc/nats/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(staged)
	if want := "port: 4222\njetstream {\n  store_dir: " + filepath.Join(dir, "volumes", "natsdata") + "\n}\n\ninclude ./no8s-auth.conf\n"; string(got) != want {
		t.Fatalf("staged:\n%s\nwant:\n%s", got, want)
	}
	link, err := os.Readlink(filepath.Join(filepath.Dir(staged), "no8s-auth.conf"))
	if err != nil || link != filepath.Join(dir, "volumes", "nats-auth", "no8s-auth.conf") {
		t.Fatalf("include link: %s %v", link, err)
	}
	if err := os.WriteFile(conf, []byte("include /etc/nats/abs.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.stageNATSConfig(p, "/etc/nats/nats-server.conf"); err == nil {
		t.Fatal("an absolute include, which nats-server would read relative to the file, was staged")
	}
}

// TestPlanVolumeOwner: a new volume of a no8s service takes the owner and
// mode of the image's directory at its target (root's 0755 without one);
// an existing volume keeps its owner.
func TestPlanVolumeOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir := t.TempDir()
	r := &Run{Dir: dir, imageDirs: map[string]*imagecheck.File{"/var/lib/no8s/ca": {Mode: os.ModeDir | 0o700, UID: 65532, GID: 65532}}}
	p := &plan{kind: kindNo8s, svc: &Service{Name: "identity"}, mounts: []Mount{
		{Source: "ca", Target: "/var/lib/no8s/ca/", Named: true},
		{Source: "elsewhere", Target: "/var/lib/other", Named: true},
	}}
	if err := r.volumes(p, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][3]uint32{"ca": {65532, 65532, 0o700}, "elsewhere": {0, 0, 0o755}} {
		fi, err := os.Stat(filepath.Join(dir, "volumes", name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != want[0] || st.Gid != want[1] || uint32(fi.Mode().Perm()) != want[2] {
			t.Errorf("volume %s: %d:%d %s, want %v", name, st.Uid, st.Gid, fi.Mode().Perm(), want)
		}
	}
	r.imageDirs = nil
	if err := r.volumes(p, 0, 0); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "volumes", "ca")); fi.Sys().(*syscall.Stat_t).Uid != 65532 {
		t.Error("an existing volume changed owner")
	}
}

// TestPlanFailFast: a one-shot service that failed is named at once by
// waitStarted, and a service whose dependency will never hold fails
// whatever waits for it at once, not at the start timeout.
func TestPlanFailFast(t *testing.T) {
	f, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Dir: t.TempDir(), File: f, procs: map[string]*supervisor{}, cfg: Config{StartTimeout: time.Hour}}
	if r.order, err = f.Order(); err != nil {
		t.Fatal(err)
	}
	for _, n := range r.order {
		r.procs[n] = newSupervisor(r, &plan{svc: f.Services[n]})
	}
	r.procs["db"].update(func() { r.procs["db"].started, r.procs["db"].healthy = 1, true })
	r.procs["migrate"].update(func() {
		r.procs["migrate"].started, r.procs["migrate"].exited, r.procs["migrate"].exitCode = 1, true, 1
	})
	if _, err := r.procs["migrate"].reached(ConditionCompleted); err == nil {
		t.Fatal("a one-shot service that exited 1 may still complete")
	}
	r.procs["app"].update(func() { r.procs["app"].failed = errors.New("depends on migrate") })
	if _, err := r.procs["app"].reached(ConditionStarted); err == nil {
		t.Fatal("a service that never starts may still start")
	}
	start := time.Now()
	err = r.waitStarted(t.Context())
	var se *StepError
	if !errors.As(err, &se) || se.Step != "start" || len(se.Services) != 1 || se.Services[0] != "migrate" || time.Since(start) > 5*time.Second {
		t.Fatalf("waitStarted: %v after %s, want step start naming migrate at once", err, time.Since(start))
	}
}
