package composerun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Prefix starts the name of every network namespace the runner makes:
// no8s-<run id>-<host>, the run id being the start time (UTC, to the second)
// and four random hex digits: no8s-20261127t180501-ab12-gateway.
const Prefix = "no8s-"

// Subnet is the one address range of the runner's test hosts. Each run has
// its own bridge in a namespace of its own, so concurrent runs use the same
// range without meeting; nothing of it is routed in the root namespace.
var Subnet = netip.MustParsePrefix("10.253.0.0/24")

// SweepAge is how old a leftover of another run must be before the sweep
// at start removes it: a younger one may belong to a run still going.
const SweepAge = 3 * time.Hour

const idTime = "20060102t150405"

var nameRE = regexp.MustCompile(`^` + Prefix + `(\d{8}t\d{6})-([0-9a-f]{4})-`)

// NewRunID returns a run id carrying its start time.
func NewRunID(now time.Time) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return now.UTC().Format(idTime) + "-" + hex.EncodeToString(b)
}

// RunStart parses the start time out of a namespace name made by the
// runner; ok is false for other names.
func RunStart(name string) (run string, start time.Time, ok bool) {
	m := nameRE.FindStringSubmatch(name)
	if m == nil {
		return "", time.Time{}, false
	}
	t, err := time.Parse(idTime, m[1])
	if err != nil {
		return "", time.Time{}, false
	}
	return m[1] + "-" + m[2], t, true
}

// ip runs ip(8) with args.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Preflight fails, naming what is missing, unless the runner can make
// network namespaces: root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and the
// commands it runs.
func Preflight() error {
	var missing []string
	for _, c := range []string{"ip", "setpriv", "docker-compose"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, "the command "+c)
		}
	}
	if os.Geteuid() != 0 && !hasCaps() {
		missing = append(missing, "root, or CAP_NET_ADMIN and CAP_SYS_ADMIN (network namespaces, veth pairs, /etc/netns), and CAP_SETUID/CAP_SETGID (running each service as its user)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the Compose check cannot run here: it needs %s", strings.Join(missing, "; "))
	}
	return nil
}

// hasCaps reports whether the effective capabilities include
// CAP_NET_ADMIN (12), CAP_SYS_ADMIN (21), CAP_SETUID (7) and CAP_SETGID (6).
func hasCaps() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false
			}
			const want = 1<<12 | 1<<21 | 1<<7 | 1<<6
			return caps&want == want
		}
	}
	return false
}

// ListNamespaces returns the names `ip netns list` shows.
func ListNamespaces(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// DeleteNamespace kills every process in the namespace, deletes it and its
// /etc/netns directory. Deleting a namespace deletes the links in it.
func DeleteNamespace(ctx context.Context, name string) error {
	if out, err := exec.CommandContext(ctx, "ip", "netns", "pids", name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	var errs []error
	if err := ip(ctx, "netns", "delete", name); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(filepath.Join("/etc/netns", name)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Sweep deletes the namespaces of runs that started more than age before
// now (a killed run's leftovers) and keeps younger ones, which may belong
// to a run still going. It returns the names deleted.
func Sweep(ctx context.Context, now time.Time, age time.Duration) ([]string, error) {
	names, err := ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, n := range names {
		_, start, ok := RunStart(n)
		if !ok || now.Sub(start) < age {
			continue
		}
		if err := DeleteNamespace(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, n)
	}
	// /etc/netns directories whose namespace is gone.
	if dirs, err := os.ReadDir("/etc/netns"); err == nil {
		for _, d := range dirs {
			if _, start, ok := RunStart(d.Name()); ok && now.Sub(start) >= age {
				_ = os.RemoveAll(filepath.Join("/etc/netns", d.Name()))
			}
		}
	}
	return deleted, errors.Join(errs...)
}

// network is one run's namespaces: a bridge namespace holding the bridge
// br0, and one namespace per host, each with eth0 joined to the bridge by a
// veth pair made inside the namespaces (no link ever appears in the root
// namespace).
type network struct {
	run    string
	bridge string
	hosts  map[string]*host
	order  []string
	// aliases are more names of a host in every hosts file.
	aliases map[string][]string
}

type host struct {
	name  string // the Compose service name, or "client"
	netns string
	addr  netip.Addr
}

func newNetwork(run string) *network {
	return &network{run: run, bridge: Prefix + run + "-bridge", hosts: map[string]*host{}, aliases: map[string][]string{}}
}

func (n *network) nsName(h string) string { return Prefix + n.run + "-" + h }

// create makes the bridge namespace and one namespace per host name, in
// order, each with the next address of Subnet (.1 is left unused).
func (n *network) create(ctx context.Context, names []string) error {
	if err := ip(ctx, "netns", "add", n.bridge); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"-n", n.bridge, "link", "add", "br0", "type", "bridge"},
		{"-n", n.bridge, "link", "set", "br0", "up"},
		{"-n", n.bridge, "link", "set", "lo", "up"},
	} {
		if err := ip(ctx, args...); err != nil {
			return err
		}
	}
	addr := Subnet.Addr().Next()
	for i, name := range names {
		addr = addr.Next()
		if !Subnet.Contains(addr) {
			return fmt.Errorf("more hosts than %s holds", Subnet)
		}
		h := &host{name: name, netns: n.nsName(name), addr: addr}
		if err := ip(ctx, "netns", "add", h.netns); err != nil {
			return err
		}
		n.hosts[name], n.order = h, append(n.order, name)
		port := fmt.Sprintf("v%d", i)
		for _, args := range [][]string{
			{"-n", n.bridge, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.netns},
			{"-n", n.bridge, "link", "set", port, "master", "br0", "up"},
			{"-n", h.netns, "addr", "add", fmt.Sprintf("%s/%d", addr, Subnet.Bits()), "dev", "eth0"},
			{"-n", h.netns, "link", "set", "eth0", "up"},
			{"-n", h.netns, "link", "set", "lo", "up"},
		} {
			if err := ip(ctx, args...); err != nil {
				return fmt.Errorf("host %s: %w", name, err)
			}
		}
	}
	return n.writeHosts()
}

// writeHosts writes /etc/netns/<ns>/hosts for every host: localhost, the
// host's own name, and every other host by its Compose service name and
// its aliases.
func (n *network) writeHosts() error {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	for _, name := range n.order {
		fmt.Fprintf(&b, "%s\t%s\n", n.hosts[name].addr, strings.Join(append([]string{name}, n.aliases[name]...), " "))
	}
	for _, name := range n.order {
		dir := filepath.Join("/etc/netns", n.hosts[name].netns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("hosts of %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("hosts of %s: %w", name, err)
		}
	}
	return nil
}

// destroy deletes every namespace of the run and the /etc/netns entries.
func (n *network) destroy(ctx context.Context) error {
	var errs []error
	for _, name := range n.order {
		if err := DeleteNamespace(ctx, n.hosts[name].netns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := DeleteNamespace(ctx, n.bridge); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
