package kuberun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/no8s/no8s/services/deploycheck/composerun"
)

// Config says what to run and with what.
type Config struct {
	// Manifests are the rendered objects (helm template's output);
	// Namespace is the release's, for objects that name none.
	Manifests []byte
	Namespace string
	// DNS are more names of Services (NAME.NS), as a cluster's DNS or an
	// Ingress would answer them: the gateway's public name when it
	// answers only its allowed hosts.
	DNS map[string]string
	// ClaimsDir keeps the volume claims' directories (a StatefulSet's
	// volumeClaimTemplates, a persistentVolumeClaim) across runs, by
	// namespace, pod and volume: a later run on the same ClaimsDir finds
	// the data an earlier one left, as an upgrade does. Empty: the run's
	// own directory, removed at Close. Every user must be able to reach
	// it (mode 0755 and its parents too).
	ClaimsDir string
	// Upgrade runs the objects of `helm template --is-upgrade` as an
	// upgrade of a running release: the release's StatefulSets (its
	// bundled database and NATS, which the previous revision left running
	// on their claims) are not held until the pre-upgrade hooks complete;
	// every other pod is.
	Upgrade bool
	// Existing are objects the cluster already runs before the release
	// (an external database or NATS): started with the release's, but
	// not after its hooks.
	Existing []byte
	// Image, Binaries, NATSServer and StartTimeout are composerun's: the
	// no8s image whose binaries run its pods, the nats-server standing for
	// nats:N, and the bound on the start of every pod.
	Image        string
	Binaries     []string
	NATSServer   string
	StartTimeout time.Duration
	// Credentials is the directory `no8s identity ensure` wrote the
	// identity values from (the flow's NATS reader, gateway credential and
	// bootstrap token).
	Credentials string
	// GatewayCAs are the PEM certificates the flow trusts for the
	// gateways' TLS (the issuer of gateway.tlsSecret's certificate).
	GatewayCAs []byte
	Log        io.Writer
}

// Run is the rendered topology running: every pod a process in a network
// namespace of its own (composerun), every Service a virtual address
// forwarding to its ready pods.
type Run struct {
	*composerun.Run
	Topology *Topology
	dir      string
	claims   string
}

// Start runs the rendered objects as a kubelet and kube-proxy would: the
// pre-install hook Jobs first, to completion, then every other pod with
// its command, resolved environment, volumes' files (owned by the pod's
// fsGroup), user and readiness probe; each Service answers at its own
// address on the bridge under its DNS names (NAME, NAME.NS,
// NAME.NS.svc.cluster.local) and forwards each port to the targetPort of
// a ready pod its selector picks. Images are substituted only by
// composerun's table. The caller must Close the Run.
func Start(ctx context.Context, cfg Config) (_ *Run, err error) {
	top, err := Read(Documents(cfg.Existing, cfg.Manifests), cfg.Namespace)
	if err != nil {
		return nil, fmt.Errorf("read the rendered objects: %w", err)
	}
	existing, err := Read(cfg.Existing, cfg.Namespace)
	if err != nil {
		return nil, fmt.Errorf("read the existing objects: %w", err)
	}
	r := &Run{Topology: top}
	if r.dir, err = os.MkdirTemp("", "no8s-kuberun-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(r.dir)
		}
	}()
	if err := os.Chmod(r.dir, 0o755); err != nil {
		return nil, err
	}
	file := &composerun.File{Services: map[string]*composerun.Service{}}
	var hooks []string
	for _, p := range top.Pods {
		if p.Hook {
			hooks = append(hooks, p.Name)
		}
	}
	before := map[string]bool{} // the existing objects' pods: not after the hooks
	for _, p := range existing.Pods {
		before[p.Namespace+"/"+p.Name] = true
	}
	if cfg.Upgrade {
		for _, p := range top.Pods {
			if strings.HasPrefix(p.Owner, "StatefulSet/") {
				before[p.Namespace+"/"+p.Name] = true
			}
		}
	}
	r.claims = cfg.ClaimsDir
	for _, p := range top.Pods {
		if _, dup := file.Services[p.Name]; dup {
			return nil, fmt.Errorf("two pods named %s (in namespaces of their own): the runner names hosts by pod", p.Name)
		}
		after := hooks
		if before[p.Namespace+"/"+p.Name] {
			after = nil
		}
		s, err := r.service(p, after)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		file.Services[p.Name] = s
	}
	r.Run, err = composerun.Start(ctx, composerun.Config{
		File: file, VIPs: vips(top, cfg.DNS), Image: cfg.Image, Binaries: cfg.Binaries, NATSServer: cfg.NATSServer,
		StartTimeout: cfg.StartTimeout, Log: cfg.Log,
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Close stops everything and removes the pods' files.
func (r *Run) Close() error {
	return errors.Join(r.Run.Close(), os.RemoveAll(r.dir))
}

// service is how pod p runs under composerun, started once the hooks
// named have completed.
func (r *Run) service(p *Pod, hooks []string) (*composerun.Service, error) {
	s := &composerun.Service{Name: p.Name, Image: p.Image, Command: p.Argv, Environment: map[string]string{}, Restart: "always"}
	if p.Job {
		s.Restart = "on-failure"
	}
	for _, e := range p.Env {
		s.Environment[e.Name] = e.Value
	}
	if p.UID != nil {
		gid := *p.UID
		if p.GID != nil {
			gid = *p.GID
		}
		s.User = fmt.Sprintf("%d:%d", *p.UID, gid)
	}
	if !p.Hook && len(hooks) > 0 {
		s.DependsOn = map[string]composerun.Dependency{}
		for _, h := range hooks {
			s.DependsOn[h] = composerun.Dependency{Condition: composerun.ConditionCompleted}
		}
	}
	for _, m := range p.Mounts {
		dir, err := r.volume(p, m)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", m.Volume, err)
		}
		v := dir + ":" + m.Path
		if m.ReadOnly {
			v += ":ro"
		}
		s.Volumes = append(s.Volumes, v)
	}
	if pr := p.Readiness; pr != nil {
		s.Healthcheck = &composerun.Healthcheck{
			Interval: fmt.Sprintf("%ds", pr.Period), Timeout: fmt.Sprintf("%ds", pr.Timeout), Retries: pr.Failures,
		}
		if pr.Exec != nil {
			s.Healthcheck.Test = append([]string{"CMD"}, pr.Exec...)
		} else {
			s.Healthcheck.HTTPGet = &composerun.HTTPGet{Path: pr.HTTPPath, Port: pr.Port, Scheme: pr.Scheme}
		}
	}
	return s, nil
}

// volume writes one of the pod's volumes under the run's directory, as a
// kubelet lays it out: a Secret's, ConfigMap's or projected volume's files
// (owned by root and the pod's fsGroup, which may read them), an emptyDir
// or a claim's directory anyone may write (a claim's under ClaimsDir when
// set, kept with what it holds).
func (r *Run) volume(p *Pod, m Mount) (string, error) {
	dir := filepath.Join(r.dir, "pods", p.Name, m.Volume)
	if m.Persistent && r.claims != "" {
		dir = filepath.Join(r.claims, p.Namespace, p.Name, m.Volume)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	group := -1
	if p.FSGroup != nil {
		group = int(*p.FSGroup)
	}
	if m.Files == nil {
		if err := os.Chown(dir, 0, max(group, 0)); err != nil {
			return "", err
		}
		return dir, os.Chmod(dir, 0o777)
	}
	for _, f := range m.Files {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		mode := os.FileMode(f.Mode).Perm()
		if group >= 0 {
			mode |= 0o040
		}
		if err := os.WriteFile(path, f.Data, mode); err != nil {
			return "", err
		}
		if err := os.Chown(path, 0, max(group, 0)); err != nil {
			return "", err
		}
		if err := os.Chmod(path, mode); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// vips are the Services' virtual addresses: each named NAME.NS, with its
// other DNS names as aliases, each port forwarding to its pods' target
// ports (a pod that names no such port is no endpoint).
func vips(top *Topology, dns map[string]string) []composerun.VIP {
	var out []composerun.VIP
	for _, s := range top.Services {
		names := s.DNSNames()
		v := composerun.VIP{Name: names[1], Aliases: []string{names[0], s.Name + "." + s.Namespace + ".svc", names[2]}}
		for name, svc := range dns {
			if svc == v.Name {
				v.Aliases = append(v.Aliases, name)
			}
		}
		for _, sp := range s.Ports {
			vp := composerun.VIPPort{Port: sp.Port}
			for _, p := range s.Pods {
				if port := s.TargetPort(sp, p); port != 0 {
					vp.Targets = append(vp.Targets, composerun.VIPTarget{Service: p.Name, Port: port})
				}
			}
			v.Ports = append(v.Ports, vp)
		}
		out = append(out, v)
	}
	return out
}

// Service is the Service a DNS name names from namespace ns (NAME, NAME.NS,
// NAME.NS.svc, NAME.NS.svc.cluster.local), or nil.
func (r *Run) Service(name, ns string) *Service {
	labels := strings.Split(name, ".")
	if len(labels) > 1 {
		ns = labels[1]
	}
	for _, s := range r.Topology.Services {
		if s.Name == labels[0] && s.Namespace == ns {
			return s
		}
	}
	return nil
}

// Targets are what composerun's flow talks to: the gateway Service of the
// release (the pods of the Deployment whose name ends in "-gateway"), the
// NATS and database the store's pods name, and for the failover the first
// pod of every Deployment but the scheduler's, and the scheduler leader's
// pod (its holder is its pod's name).
func (r *Run) Targets(cfg Config) (composerun.Targets, error) {
	var store *Pod
	var deployments []string
	for _, p := range r.Topology.Pods {
		if strings.HasPrefix(p.Owner, "Deployment/") && strings.HasSuffix(p.Name, "-0") {
			deployments = append(deployments, p.Owner)
			if strings.HasSuffix(p.Owner, "-store") {
				store = p
			}
		}
	}
	if store == nil {
		return composerun.Targets{}, errors.New("no store Deployment among the rendered objects")
	}
	env := map[string]string{}
	for _, e := range store.Env {
		env[e.Name] = e.Value
	}
	db, err := url.Parse(env["NO8S_DATABASE_URL"])
	if err != nil || db.User == nil {
		return composerun.Targets{}, fmt.Errorf("the store's NO8S_DATABASE_URL: %v", err)
	}
	nats, err := url.Parse(env["NO8S_NATS_URL"])
	if err != nil {
		return composerun.Targets{}, fmt.Errorf("the store's NO8S_NATS_URL: %w", err)
	}
	host := func(dns string) (string, error) {
		s := r.Service(dns, store.Namespace)
		if s == nil {
			return "", fmt.Errorf("no Service %s", dns)
		}
		return s.Name + "." + s.Namespace, nil
	}
	gateway, err := host(strings.TrimSuffix(strings.TrimPrefix(store.Owner, "Deployment/"), "-store") + "-gateway")
	if err != nil {
		return composerun.Targets{}, err
	}
	api, err := r.apiURL(cfg, gateway)
	if err != nil {
		return composerun.Targets{}, err
	}
	t := composerun.Targets{API: api, RootCAs: cfg.GatewayCAs, AdminTokenFile: filepath.Join(cfg.Credentials, "bootstrap.token"), Credentials: cfg.Credentials}
	if t.NATS, err = host(nats.Hostname()); err != nil {
		return t, err
	}
	if t.Store, err = host(strings.TrimPrefix(store.Owner, "Deployment/")); err != nil {
		return t, err
	}
	pw, _ := db.User.Password()
	t.Postgres = composerun.PostgresTarget{Name: db.Hostname(), User: db.User.Username(), Password: pw}
	if t.Postgres.Host, err = host(db.Hostname()); err != nil {
		return t, err
	}
	t.Failover = func(holder string) ([]string, string, error) {
		if !slices.ContainsFunc(r.Topology.Pods, func(p *Pod) bool { return p.Name == holder }) {
			return nil, "", fmt.Errorf("the scheduler leader %q is no pod of the run", holder)
		}
		kill := []string{holder}
		for _, d := range deployments {
			if !strings.HasSuffix(d, "-scheduler") {
				kill = append(kill, strings.TrimPrefix(d, "Deployment/")+"-"+strconv.Itoa(0))
			}
		}
		return kill, api, nil
	}
	return t, nil
}

// apiURL is the base URL of the gateway Service (NAME.NS): over TLS when
// the gateways serve it (checked against cfg.GatewayCAs); by the
// Service's address, or by the first name the gateways answer to when
// they answer only some (NO8S_ALLOWED_HOSTS), which cfg.DNS must give.
func (r *Run) apiURL(cfg Config, gateway string) (string, error) {
	gw := r.Service(gateway, "")
	scheme, apiHost := "http", r.Addr(gateway)
	for _, e := range gw.Pods[0].Env {
		switch {
		case e.Name == "NO8S_TLS_CERT_FILE" && e.Value != "":
			scheme = "https"
		case e.Name == "NO8S_ALLOWED_HOSTS" && e.Value != "":
			name, _, _ := strings.Cut(e.Value, ",")
			if cfg.DNS[name] != gateway {
				return "", fmt.Errorf("the gateways answer only %s: Config.DNS must name %s for %s", e.Value, name, gateway)
			}
			apiHost = name
		}
	}
	if scheme == "https" && len(cfg.GatewayCAs) == 0 {
		return "", errors.New("the gateways serve TLS: Config.GatewayCAs must hold their certificate's issuer")
	}
	return fmt.Sprintf("%s://%s:%d", scheme, apiHost, gw.Ports[0].Port), nil
}
