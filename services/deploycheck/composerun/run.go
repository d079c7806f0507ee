package composerun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/no8s/no8s/services/deploycheck/imagecheck"
)

// ClientHost is the name of the namespace the check's client runs in: the
// only place the published ports are reachable.
const ClientHost = "client"

// Config says what to run and with what.
type Config struct {
	// ComposeFile is the Compose file, run as written; ProjectDir is the
	// directory its relative paths start from (its own by default).
	ComposeFile, ProjectDir string
	// File, when set, is run instead of ComposeFile (no docker-compose):
	// the services a caller made, such as the Kubernetes runner's pods,
	// their bind mounts absolute paths.
	File *File
	// VIPs are hosts that run no process: each forwards its ports to the
	// ready services behind it (a Kubernetes Service's virtual address).
	VIPs []VIP
	// Image is the no8s image whose binaries run the services whose image
	// it is (docker-compose.yml's ${NO8S_IMAGE}); Binaries are the
	// binaries taken out of it.
	Image    string
	Binaries []string
	// NATSServer is the pinned nats-server binary that stands for nats:N.
	NATSServer string
	// PostgresBin is Debian's PostgreSQL bin directory that stands for
	// postgres:N (the newest /usr/lib/postgresql/*/bin when empty).
	PostgresBin string
	// ProcessBinaries, when set, is a directory of binaries that run the
	// no8s services' processes instead of the image's (an earlier release,
	// for the upgrade check); health checks still run the image's.
	ProcessBinaries string
	// VolumesDir holds a directory per named volume; empty: the run's
	// directory, removed at the end. A directory of its own outlives the
	// run, so that a later run starts on the same volumes.
	VolumesDir string
	// StartTimeout bounds the start of the whole file (every service with
	// a health check healthy, every one-shot service done).
	StartTimeout time.Duration
	// Log receives the runner's progress and the substitution table.
	Log io.Writer
}

// Run is one running Compose topology.
type Run struct {
	cfg   Config
	ID    string
	Dir   string
	File  *File
	net   *network
	plans map[string]*plan
	procs map[string]*supervisor
	uid   int // the image's numeric user
	gid   int
	// imageDirs are the no8s image's directories by path (their owner
	// and mode become a new named volume's, as an engine copies them).
	imageDirs map[string]*imagecheck.File
	// order is the start order (depends_on first).
	order []string

	stopOnce sync.Once
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	proxies  []net.Listener
	sigs     chan os.Signal
}

// StepError is a failure of one step of the check, naming the services the
// step needed.
type StepError struct {
	Step     string
	Services []string
	Err      error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("step %q (services %s): %v", e.Step, strings.Join(e.Services, ", "), e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

func stepErr(step string, err error, services ...string) error {
	if err == nil {
		return nil
	}
	return &StepError{Step: step, Services: services, Err: err}
}

func (r *Run) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "compose-run %s: "+format+"\n", append([]any{r.ID}, args...)...)
	}
}

// Start runs the Compose file: preflight, sweep, normalise and parse, plan
// the images (printing the substitution table), take the binaries out of
// the image, make the network, start every service as its depends_on
// conditions allow, and wait until every service with a health check is
// healthy and every one-shot service has finished. On any failure
// everything made so far is removed. The caller must Close the Run.
func Start(ctx context.Context, cfg Config) (_ *Run, err error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 4 * time.Minute
	}
	r := &Run{cfg: cfg, ID: NewRunID(time.Now()), plans: map[string]*plan{}, procs: map[string]*supervisor{}}
	if err := stepErr("preflight", Preflight()); err != nil {
		return nil, err
	}
	if deleted, err := Sweep(ctx, time.Now(), SweepAge); err != nil {
		r.logf("sweep: %v", err)
	} else if len(deleted) > 0 {
		r.logf("sweep removed leftovers older than %s: %v", SweepAge, deleted)
	}
	if r.File = cfg.File; r.File == nil {
		projectDir := cfg.ProjectDir
		if projectDir == "" {
			projectDir = filepath.Dir(cfg.ComposeFile)
		}
		data, err := Normalise(ctx, cfg.ComposeFile, projectDir, "NO8S_IMAGE="+cfg.Image)
		if err != nil {
			return nil, stepErr("validate", err)
		}
		if r.File, err = Parse(data); err != nil {
			return nil, stepErr("validate", err)
		}
	}
	order, err := r.File.Order()
	if err != nil {
		return nil, stepErr("validate", err)
	}
	if err := r.planAll(order); err != nil {
		return nil, err
	}
	r.order = order
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			if cerr := r.Close(); cerr != nil {
				r.logf("cleanup: %v", cerr)
			}
		}
	}()
	if r.Dir, err = os.MkdirTemp("", "no8s-compose-"+r.ID+"-"); err != nil {
		return nil, stepErr("prepare", err)
	}
	if err := os.Chmod(r.Dir, 0o755); err != nil {
		return nil, stepErr("prepare", err)
	}
	r.catchSignals()
	if err := r.extract(ctx); err != nil {
		return nil, stepErr("image", err)
	}
	r.net = newNetwork(r.ID)
	hosts := append([]string{}, order...)
	for _, v := range cfg.VIPs {
		hosts = append(hosts, v.Name)
		r.net.aliases[v.Name] = v.Aliases
	}
	if err := r.net.create(ctx, append(hosts, ClientHost)); err != nil {
		return nil, stepErr("network", err)
	}
	r.logf("network %s: bridge namespace %s, hosts %s", Subnet, r.net.bridge, r.hostTable())
	if err := r.publish(); err != nil {
		return nil, stepErr("publish", err)
	}
	for _, name := range order {
		r.procs[name] = newSupervisor(r, r.plans[name])
	}
	for _, name := range order {
		r.wg.Add(1)
		go func(s *supervisor) {
			defer r.wg.Done()
			s.run()
		}(r.procs[name])
	}
	if err := r.serveVIPs(); err != nil {
		return nil, stepErr("vips", err)
	}
	if err := r.waitStarted(ctx); err != nil {
		return nil, err
	}
	r.logf("every service started: %s", strings.Join(order, ", "))
	return r, nil
}

func (r *Run) hostTable() string {
	var parts []string
	for _, n := range r.net.order {
		parts = append(parts, n+"="+r.net.hosts[n].addr.String())
	}
	return strings.Join(parts, " ")
}

// waitStarted waits, within StartTimeout, for every service's target
// state: healthy when it has a health check, done (exit 0) when it is a
// one-shot service (restart "no" and something waits for its completion),
// else started. It waits in the start order, so that a one-shot service
// that fails is the service named, at once: what depends on it never
// starts (supervisor.run) and is not waited for until the timeout.
func (r *Run) waitStarted(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.StartTimeout)
	for _, n := range r.order {
		s := r.procs[n]
		want := ConditionStarted
		if s.plan.svc.Healthcheck != nil && !s.plan.svc.Healthcheck.Disable {
			want = ConditionHealthy
		}
		if r.completedWanted(n) {
			want = ConditionCompleted
		}
		if err := s.wait(ctx, want, deadline); err != nil {
			return stepErr("start", err, n)
		}
	}
	return nil
}

func (r *Run) completedWanted(name string) bool {
	for _, s := range r.File.Services {
		if d, ok := s.DependsOn[name]; ok && d.Condition == ConditionCompleted {
			return true
		}
	}
	return false
}

// extract takes the binaries out of the image and reads its user.
func (r *Run) extract(ctx context.Context) error {
	img, err := imagecheck.Save(ctx, r.cfg.Image, r.Dir)
	if err != nil {
		return err
	}
	uid, gid, _ := strings.Cut(img.Config.Config.User, ":")
	if r.uid, err = strconv.Atoi(uid); err != nil {
		return fmt.Errorf("image %s: user %q is not numeric", r.cfg.Image, img.Config.Config.User)
	}
	if r.gid, err = strconv.Atoi(gid); err != nil {
		r.gid = r.uid
	}
	r.imageDirs = map[string]*imagecheck.File{}
	for p, f := range img.Files {
		if f.Mode.IsDir() {
			r.imageDirs[path.Clean("/"+p)] = f
		}
	}
	bin := filepath.Join(r.Dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	for _, b := range r.cfg.Binaries {
		if _, err := img.Extract("/usr/local/bin/"+b, bin); err != nil {
			return err
		}
	}
	if r.cfg.ProcessBinaries != "" {
		// Copied, so that the image's user can run them wherever they are.
		procbin := filepath.Join(r.Dir, "procbin")
		if err := os.Mkdir(procbin, 0o755); err != nil {
			return err
		}
		for _, b := range r.cfg.Binaries {
			data, err := os.ReadFile(filepath.Join(r.cfg.ProcessBinaries, b))
			if err != nil {
				return fmt.Errorf("process binaries: %w", err)
			}
			if err := os.WriteFile(filepath.Join(procbin, b), data, 0o755); err != nil {
				return err
			}
		}
	}
	if _, err := img.Extract("/etc/ssl/certs/ca-certificates.crt", r.Dir); err != nil {
		return err
	}
	return os.Chmod(filepath.Join(r.Dir, "ca-certificates.crt"), 0o644)
}

// inNetns runs fn on a thread that joined the network namespace ns, then
// moves the thread back to its namespace. A thread that cannot go back is
// never returned to the runtime's pool: it ends with fn's goroutine. Sockets
// fn opens stay in ns.
func inNetns(ns string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- fmt.Errorf("this thread's network namespace: %w", err)
			return
		}
		defer home.Close()
		f, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			done <- fmt.Errorf("network namespace %s: %w", ns, err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("join network namespace %s: %w", ns, err)
			return
		}
		err = fn()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// DialContext connects from the client namespace; a host of the run (or
// an alias of one) is dialled at its address, as the namespaces' hosts
// files resolve it.
func (r *Run) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if a := r.lookup(host); a != "" {
			addr = net.JoinHostPort(a, port)
		}
	}
	var c net.Conn
	err := inNetns(r.net.hosts[ClientHost].netns, func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on port in the client namespace (a server the services
// call, such as an HttpSource's feed), on the client's address on the
// bridge.
func (r *Run) Listen(port int) (net.Listener, error) {
	var l net.Listener
	err := inNetns(r.net.hosts[ClientHost].netns, func() error {
		var err error
		l, err = net.Listen("tcp", net.JoinHostPort(r.net.hosts[ClientHost].addr.String(), strconv.Itoa(port)))
		return err
	})
	return l, err
}

// HTTPClient is a client whose connections start in the client namespace.
func (r *Run) HTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: r.DialContext, Proxy: nil}}
}

// lookup is the address of a host of the run by its name or an alias, ""
// for another name.
func (r *Run) lookup(name string) string {
	if a := r.Addr(name); a != "" {
		return a
	}
	for host, aliases := range r.net.aliases {
		for _, a := range aliases {
			if a == name {
				return r.Addr(host)
			}
		}
	}
	return ""
}

// Addr is a service's address on the bridge.
func (r *Run) Addr(service string) string {
	if h, ok := r.net.hosts[service]; ok {
		return h.addr.String()
	}
	return ""
}

// publish makes every published port reachable in the client namespace,
// and only there: 127.0.0.1:<published> forwards to the service's target
// port.
func (r *Run) publish() error {
	for name, s := range r.File.Services {
		for _, p := range s.Ports {
			if p.Protocol != "" && p.Protocol != "tcp" {
				return fmt.Errorf("service %s: port %d/%s: only tcp is published", name, p.Published, p.Protocol)
			}
			var l net.Listener
			err := inNetns(r.net.hosts[ClientHost].netns, func() error {
				var err error
				l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.Published))
				return err
			})
			if err != nil {
				return fmt.Errorf("service %s: publish %d: %w", name, p.Published, err)
			}
			r.proxies = append(r.proxies, l)
			target := net.JoinHostPort(r.Addr(name), strconv.Itoa(p.Target))
			r.logf("published: client 127.0.0.1:%d -> %s %s", p.Published, name, target)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.forward(l, target)
			}()
		}
	}
	return nil
}

func (r *Run) forward(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go r.pipe(c, func() (net.Conn, error) { return r.DialContext(r.ctx, "tcp", target) })
	}
}

// pipe copies between c and the connection dial makes until either side
// ends or the run stops.
func (r *Run) pipe(c net.Conn, dial func() (net.Conn, error)) {
	defer c.Close()
	up, err := dial()
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-r.ctx.Done():
	}
}

// Kill sends sig to the service's process (its restart policy applies).
func (r *Run) Kill(service string, sig syscall.Signal) error {
	s, ok := r.procs[service]
	if !ok {
		return fmt.Errorf("no service %s", service)
	}
	return s.signal(sig)
}

// Restarts returns how many times the service's process was started.
func (r *Run) Starts(service string) int {
	if s, ok := r.procs[service]; ok {
		return s.startCount()
	}
	return 0
}

// LogTail returns the end of the service's log.
func (r *Run) LogTail(service string, n int) string {
	data, _ := os.ReadFile(filepath.Join(r.Dir, "logs", service+".log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// catchSignals removes everything on SIGINT or SIGTERM, then exits.
func (r *Run) catchSignals() {
	r.sigs = make(chan os.Signal, 1)
	signalNotify(r.sigs)
	go func() {
		sig, ok := <-r.sigs
		if !ok {
			return
		}
		r.logf("%s: removing everything of the run", sig)
		_ = r.Close()
		os.Exit(130)
	}()
}

// Close stops every process (SIGTERM, SIGKILL after 10 s), removes the
// namespaces, /etc/netns entries and the run directory. Safe to call more
// than once.
func (r *Run) Close() error {
	var errs []error
	r.stopOnce.Do(func() {
		if r.sigs != nil {
			signalStop(r.sigs)
			close(r.sigs)
		}
		if r.cancel != nil {
			r.cancel()
		}
		for _, l := range r.proxies {
			_ = l.Close()
		}
		var wg sync.WaitGroup
		for _, s := range r.procs {
			wg.Add(1)
			go func() { defer wg.Done(); s.stop(10 * time.Second) }()
		}
		wg.Wait()
		r.wg.Wait()
		if r.net != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := r.net.destroy(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if r.Dir != "" && os.Getenv("NO8S_COMPOSE_KEEP") == "" {
			if err := os.RemoveAll(r.Dir); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}

// lookupUser returns a system user's uid and gid.
func lookupUser(name string) (int, int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// command builds `ip netns exec <ns> setpriv --reuid U --regid G
// --clear-groups -- argv...` with env.
func (r *Run) command(ctx context.Context, service string, uid, gid int, env []string, argv ...string) *exec.Cmd {
	args := append([]string{"netns", "exec", r.net.hosts[service].netns, "setpriv",
		"--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--clear-groups", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A daemon it started (pg_ctl's server) may hold its output open:
	// stop waiting for the output this long after it exited.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runOnce runs a command to its end and returns its combined output.
func (r *Run) runOnce(ctx context.Context, service string, uid, gid int, env []string, argv ...string) (string, error) {
	var out bytes.Buffer
	cmd := r.command(ctx, service, uid, gid, env, argv...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
