package composerun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// What each image runs as. The table is printed at every run.
const (
	kindNo8s     = "no8s"
	kindPostgres = "postgres"
	kindNATS     = "nats"
)

var (
	postgresImage = regexp.MustCompile(`^(docker\.io/(library/)?)?postgres:\d+(\.\d+)*$`)
	natsImage     = regexp.MustCompile(`^(docker\.io/(library/)?)?nats:\d+(\.\d+)*$`)
)

// plan is how one service runs here.
type plan struct {
	svc    *Service
	kind   string
	mounts []Mount
}

// planAll classifies every service's image by the substitution table and
// prints the table; an image outside it fails the run, naming the service.
func (r *Run) planAll(order []string) error {
	if r.cfg.PostgresBin == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Strings(matches)
		if len(matches) > 0 {
			r.cfg.PostgresBin = matches[len(matches)-1]
		}
	}
	var table []string
	for _, name := range order {
		s := r.File.Services[name]
		p := &plan{svc: s}
		var runs string
		switch {
		case s.Image == r.cfg.Image:
			p.kind, runs = kindNo8s, "the image's own binaries (taken out of it), as "+asUser(s)
			if r.cfg.ProcessBinaries != "" {
				runs = "the binaries of " + r.cfg.ProcessBinaries + " (health checks: the image's), as " + asUser(s)
			}
		case postgresImage.MatchString(s.Image):
			if r.cfg.PostgresBin == "" {
				return stepErr("images", fmt.Errorf("image %s stands for Debian's PostgreSQL, which is not installed (/usr/lib/postgresql/*/bin)", s.Image), name)
			}
			p.kind, runs = kindPostgres, "Debian's PostgreSQL ("+r.cfg.PostgresBin+"), initdb'd and run as user postgres, POSTGRES_USER/PASSWORD/DB honoured"
		case natsImage.MatchString(s.Image):
			if _, err := os.Stat(r.cfg.NATSServer); err != nil {
				return stepErr("images", fmt.Errorf("image %s stands for the pinned nats-server, which is missing (make nats-server): %w", s.Image, err), name)
			}
			p.kind, runs = kindNATS, "the pinned nats-server ("+r.cfg.NATSServer+") with the service's command, as "+asUser(s)
		default:
			return stepErr("images", fmt.Errorf("image %q is not in the substitution table (the no8s image %s, postgres:N, nats:N)", s.Image, r.cfg.Image), name)
		}
		var err error
		if p.mounts, err = s.Mounts(); err != nil {
			return stepErr("images", err, name)
		}
		r.plans[name] = p
		table = append(table, fmt.Sprintf("  %-20s %-28s -> %s", name, s.Image, runs))
	}
	r.logf("image substitution:\n%s", strings.Join(table, "\n"))
	return nil
}

// asUser says who a no8s or NATS service runs as.
func asUser(s *Service) string {
	if s.User != "" {
		return "user " + s.User
	}
	return "the no8s image's numeric user"
}

// hostPath maps a path inside the container to the host: a path at or
// under a mount's target goes under the mount's source (a named volume is
// the run's directory volumes/<name>), the longest target winning, as
// mounts nest in a container (a file bound inside a mounted volume); other
// paths are unchanged.
func (r *Run) hostPath(p *plan, s string) string {
	best, bestLen := s, -1
	for _, m := range p.mounts {
		target := strings.TrimSuffix(m.Target, "/")
		if len(target) <= bestLen {
			continue
		}
		src := m.Source
		if m.Named {
			src = filepath.Join(r.volumesDir(), m.Source)
		}
		if s == target || s == m.Target {
			best, bestLen = src, len(target)
		} else if rest, ok := strings.CutPrefix(s, target+"/"); ok {
			best, bestLen = filepath.Join(src, rest), len(target)
		}
	}
	return best
}

// hostArg maps one command-line argument: a path (hostPath), or the value
// of a --flag=/path argument.
func (r *Run) hostArg(p *plan, a string) string {
	if strings.HasPrefix(a, "-") {
		if flag, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(value, "/") {
			return flag + "=" + r.hostPath(p, value)
		}
		return a
	}
	return r.hostPath(p, a)
}

func (r *Run) volumesDir() string {
	if r.cfg.VolumesDir != "" {
		return r.cfg.VolumesDir
	}
	return filepath.Join(r.Dir, "volumes")
}

// volumes makes the service's named volumes' directories. A volume met
// for the first time is made as a container engine makes it: for a
// service of the no8s image, with the owner and mode of the image's
// directory at the mount's target (an engine copies them into an empty
// volume), root's 0755 when the image has none; for the stand-ins of other
// images, owned by the process's user (uid, gid), as their entry points
// arrange. A volume that exists keeps its owner.
func (r *Run) volumes(p *plan, uid, gid int) error {
	if err := os.MkdirAll(r.volumesDir(), 0o755); err != nil {
		return err
	}
	for _, m := range p.mounts {
		if !m.Named {
			continue
		}
		dir := filepath.Join(r.volumesDir(), m.Source)
		owner, group, mode := uid, gid, os.FileMode(0o700)
		if p.kind == kindNo8s {
			owner, group, mode = r.imageDirOwner(m.Target)
		}
		if err := os.Mkdir(dir, mode); errors.Is(err, os.ErrExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("volume %s: %w", m.Source, err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			return fmt.Errorf("volume %s: %w", m.Source, err)
		}
		if err := os.Chown(dir, owner, group); err != nil {
			return fmt.Errorf("volume %s: %w", m.Source, err)
		}
		r.logf("volume %s made for %s at %s: owner %d:%d, mode %s", m.Source, p.svc.Name, m.Target, owner, group, mode)
	}
	return os.Chmod(r.volumesDir(), 0o755)
}

// imageDirOwner is the owner, group and permissions of the no8s image's
// directory target, or root's 0755 when the image has no directory there.
func (r *Run) imageDirOwner(target string) (uid, gid int, mode os.FileMode) {
	if f, ok := r.imageDirs[path.Clean(target)]; ok {
		return f.UID, f.GID, f.Mode.Perm()
	}
	return 0, 0, 0o755
}

// stageNATSConfig prepares the configuration file a nats service names
// with -c (containerConf, a path inside its container) for the pinned
// nats-server on the host: the file is read through the service's mounts,
// an absolute path it sets (store_dir, for instance) is mapped to the
// host, and each include (relative to the file, as nats-server reads them)
// becomes a symbolic link beside the staged copy pointing at the included
// file's host path. It returns the staged file.
func (r *Run) stageNATSConfig(p *plan, containerConf string) (string, error) {
	data, err := os.ReadFile(r.hostPath(p, containerConf))
	if err != nil {
		return "", fmt.Errorf("service %s: -c %s: %w", p.svc.Name, containerConf, err)
	}
	dir := filepath.Join(r.Dir, "natsconf-"+p.svc.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if m := natsInclude.FindStringSubmatch(line); m != nil {
			inc := strings.Trim(m[1], `"'`)
			if filepath.IsAbs(inc) {
				return "", fmt.Errorf("service %s: %s: include %s: nats-server reads includes relative to the file", p.svc.Name, containerConf, inc)
			}
			link := filepath.Join(dir, inc)
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				return "", err
			}
			_ = os.Remove(link)
			if err := os.Symlink(r.hostPath(p, path.Join(path.Dir(containerConf), inc)), link); err != nil {
				return "", err
			}
		} else if m := natsPathSetting.FindStringSubmatch(line); m != nil {
			line = m[1] + m[2] + r.hostPath(p, m[3]) + m[2]
		}
		out = append(out, line)
	}
	staged := filepath.Join(dir, path.Base(containerConf))
	if err := os.WriteFile(staged, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		return "", err
	}
	return staged, nil
}

var (
	natsInclude     = regexp.MustCompile(`^\s*include\s+(\S+)\s*;?\s*$`)
	natsPathSetting = regexp.MustCompile(`^(\s*[A-Za-z_]+\s*[:=]?\s*)("?)(/[^"\s]*)"?\s*$`)
)

// env is the service's environment as the process sees it: the image's
// (PATH, the CA bundle) and the service's, paths mapped.
func (r *Run) env(p *plan) []string {
	env := []string{"PATH=" + filepath.Join(r.Dir, "bin") + ":/usr/bin:/bin", "SSL_CERT_FILE=" + filepath.Join(r.Dir, "ca-certificates.crt")}
	keys := make([]string, 0, len(p.svc.Environment))
	for k := range p.svc.Environment {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+r.hostPath(p, p.svc.Environment[k]))
	}
	return env
}

// resolve returns the argv, environment and user of the service's main
// process, preparing what it needs first (volumes; PostgreSQL's initdb).
func (r *Run) resolve(ctx context.Context, p *plan) (argv, env []string, uid, gid int, err error) {
	env = r.env(p)
	switch p.kind {
	case kindNo8s:
		if uid, gid, err = r.user(p); err != nil {
			return nil, nil, 0, 0, err
		}
		cmd := append(append([]string{}, p.svc.Entrypoint...), p.svc.Command...)
		if len(cmd) == 0 {
			return nil, nil, 0, 0, fmt.Errorf("service %s: no command (the image's default is no service)", p.svc.Name)
		}
		bin := filepath.Join(r.Dir, "bin", cmd[0])
		if r.cfg.ProcessBinaries != "" {
			bin = filepath.Join(r.Dir, "procbin", cmd[0])
		}
		if _, err := os.Stat(bin); err != nil {
			return nil, nil, 0, 0, fmt.Errorf("service %s: command %s is not a binary of the image", p.svc.Name, cmd[0])
		}
		argv = []string{bin}
		for _, a := range cmd[1:] {
			argv = append(argv, r.hostArg(p, a))
		}
	case kindNATS:
		if uid, gid, err = r.user(p); err != nil {
			return nil, nil, 0, 0, err
		}
		argv = []string{r.cfg.NATSServer}
		for i := 0; i < len(p.svc.Command); i++ {
			a := p.svc.Command[i]
			conf, inline := strings.CutPrefix(a, "--config=")
			if !inline && (a == "-c" || a == "--config") && i+1 < len(p.svc.Command) {
				conf, i = p.svc.Command[i+1], i+1
			} else if !inline {
				argv = append(argv, r.hostArg(p, a))
				continue
			}
			staged, err := r.stageNATSConfig(p, conf)
			if err != nil {
				return nil, nil, 0, 0, err
			}
			argv = append(argv, "-c", staged)
		}
	case kindPostgres:
		if uid, gid, err = lookupUser("postgres"); err != nil {
			return nil, nil, 0, 0, err
		}
		var data, sock string
		if data, sock, err = r.preparePostgres(ctx, p, uid, gid, env); err != nil {
			return nil, nil, 0, 0, err
		}
		argv = []string{filepath.Join(r.cfg.PostgresBin, "postgres"), "-D", data, "-p", "5432",
			"-c", "listen_addresses=*", "-c", "unix_socket_directories=" + sock}
	}
	if err := r.volumes(p, uid, gid); err != nil {
		return nil, nil, 0, 0, err
	}
	return argv, env, uid, gid, nil
}

// healthArgv maps a health check's CMD to what runs here: a binary of the
// image, or PostgreSQL's pg_isready against the server's socket.
func (r *Run) healthArgv(p *plan) (argv, env []string, uid, gid int, err error) {
	test := p.svc.Healthcheck.Test[1:]
	env = r.env(p)
	switch p.kind {
	case kindNo8s:
		bin := filepath.Join(r.Dir, "bin", test[0])
		if _, err := os.Stat(bin); err != nil {
			return nil, nil, 0, 0, fmt.Errorf("service %s: health check %s is not a binary of the image", p.svc.Name, test[0])
		}
		uid, gid, err := r.user(p)
		return append([]string{bin}, test[1:]...), env, uid, gid, err
	case kindPostgres:
		if test[0] != "pg_isready" {
			return nil, nil, 0, 0, fmt.Errorf("service %s: health check %s: only pg_isready stands in for postgres:N", p.svc.Name, test[0])
		}
		uid, gid, err := lookupUser("postgres")
		if err != nil {
			return nil, nil, 0, 0, err
		}
		env = append(env, "PGHOST="+r.pgSocket(p))
		return append([]string{filepath.Join(r.cfg.PostgresBin, "pg_isready")}, test[1:]...), env, uid, gid, nil
	}
	return nil, nil, 0, 0, fmt.Errorf("service %s: no health check stands in for image %s", p.svc.Name, p.svc.Image)
}

// user is the numeric user and group a no8s or NATS service runs as: its
// `user` ("UID" or "UID:GID"), else the no8s image's.
func (r *Run) user(p *plan) (uid, gid int, err error) {
	if p.svc.User == "" {
		return r.uid, r.gid, nil
	}
	u, g, hasGroup := strings.Cut(p.svc.User, ":")
	if uid, err = strconv.Atoi(u); err != nil {
		return 0, 0, fmt.Errorf("service %s: user %q: only numeric users run here", p.svc.Name, p.svc.User)
	}
	gid = uid
	if hasGroup {
		if gid, err = strconv.Atoi(g); err != nil {
			return 0, 0, fmt.Errorf("service %s: user %q: only numeric groups run here", p.svc.Name, p.svc.User)
		}
	}
	return uid, gid, nil
}

func (r *Run) pgSocket(p *plan) string { return filepath.Join(r.Dir, "pgsock-"+p.svc.Name) }

// preparePostgres does what the postgres image's entry point does on an
// empty data directory: initdb with POSTGRES_USER (default postgres) and
// POSTGRES_PASSWORD, password authentication for every TCP client, and
// POSTGRES_DB created by a server listening on its socket only.
func (r *Run) preparePostgres(ctx context.Context, p *plan, uid, gid int, env []string) (data, sock string, err error) {
	data = r.hostPath(p, "/var/lib/postgresql/data")
	if data == "/var/lib/postgresql/data" {
		data = filepath.Join(r.Dir, "pgdata-"+p.svc.Name)
	}
	if pg := p.svc.Environment["PGDATA"]; pg != "" {
		data = r.hostPath(p, pg)
	}
	sock = r.pgSocket(p)
	for _, d := range []string{data, sock} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return "", "", err
		}
	}
	if err := os.Chmod(r.volumesDir(), 0o755); err != nil && !os.IsNotExist(err) {
		return "", "", err
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		return data, sock, nil
	}
	pgUser := p.svc.Environment["POSTGRES_USER"]
	if pgUser == "" {
		pgUser = "postgres"
	}
	password := p.svc.Environment["POSTGRES_PASSWORD"]
	if password == "" {
		return "", "", fmt.Errorf("service %s: POSTGRES_PASSWORD is empty (the postgres image refuses to start without it)", p.svc.Name)
	}
	pw := filepath.Join(sock, ".pw")
	if err := os.WriteFile(pw, []byte(password+"\n"), 0o600); err != nil {
		return "", "", err
	}
	_ = os.Chown(pw, uid, gid)
	defer os.Remove(pw)
	bin := func(b string) string { return filepath.Join(r.cfg.PostgresBin, b) }
	name := p.svc.Name
	if _, err := r.runOnce(ctx, name, uid, gid, env, bin("initdb"), "-D", data, "-U", pgUser, "--pwfile", pw,
		"--auth-local", "trust", "--auth-host", "scram-sha-256", "-E", "UTF8"); err != nil {
		return "", "", fmt.Errorf("service %s: initdb: %w", name, err)
	}
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", "", err
	}
	_, err = hba.WriteString("host all all all scram-sha-256\n")
	if cerr := hba.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", err
	}
	if db := p.svc.Environment["POSTGRES_DB"]; db != "" && db != "postgres" {
		opts := "-c listen_addresses= -c unix_socket_directories=" + sock
		if _, err := r.runOnce(ctx, name, uid, gid, env, bin("pg_ctl"), "-D", data, "-o", opts, "-l", filepath.Join(sock, "init.log"), "-w", "start"); err != nil {
			return "", "", fmt.Errorf("service %s: temporary server: %w", name, err)
		}
		_, cerr := r.runOnce(ctx, name, uid, gid, env, bin("psql"), "-h", sock, "-U", pgUser, "-d", "postgres", "-v", "ON_ERROR_STOP=1",
			"-c", fmt.Sprintf(`CREATE DATABASE "%s"`, strings.ReplaceAll(db, `"`, `""`)))
		if _, err := r.runOnce(ctx, name, uid, gid, env, bin("pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"); err != nil {
			return "", "", fmt.Errorf("service %s: temporary server: %w", name, err)
		}
		if cerr != nil {
			return "", "", fmt.Errorf("service %s: POSTGRES_DB: %w", name, cerr)
		}
	}
	return data, sock, nil
}
