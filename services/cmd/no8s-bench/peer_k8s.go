package main

// peer_k8s.go is the Kubernetes side of the peer scenario: etcd,
// kube-apiserver and the controller-runtime noop controller built by
// `make k8s-tools` (tools/k8s), each its own process on loopback, spoken to
// over HTTP/JSON by the bench's own code (no client-go here).

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/kubeapi"
)

var peerUserFlag = flag.String("peer-user", "admin", "peer scenario: who the bench is to the peer's API server: admin (system:masters, which API Priority and Fairness exempts, as the bench is no8s's administrator) or user (an ordinary user granted the bench's kinds by RBAC, whose requests APF queues at its global-default level)")

var peerControllerArgsFlag = flag.String("peer-controller-args", "", "peer scenario: more flags for the noop controller, space-separated (e.g. \"--finalizer bench.no8s.io/noop\" or \"--cached-reads=false\"), for looking into the peer's settings")

var k8sToolsFlag = flag.String("k8s-tools", "", "peer scenario: the directory holding kube-apiserver, etcd and noop-controller (default: what tools/k8s/build.sh --dir prints; make k8s-tools builds them)")

// The peer's API group and kinds: DatabaseCluster takes the creates and the
// list, ReconcileBench is the one the noop controller reconciles.
const (
	peerGroup       = "bench.no8s.io"
	peerVersion     = "v1"
	peerAPIKind     = "DatabaseCluster"
	peerAPIPlural   = "databaseclusters"
	peerReadyKind   = "ReconcileBench"
	peerReadyPlural = "reconcilebenches"
)

// k8sPeer is a running Kubernetes peer.
type k8sPeer struct {
	env       *benchEnv
	tools     string // the binaries' directory
	dir       string // its certificates, tokens and etcd's data
	url       string // the API server's base URL
	load      *http.Client
	watch     *http.Client
	tokenFile string // the controller's token
	caFile    string
	workers   int // the controller's MaxConcurrentReconciles
	settings  []string
	ctrl      *benchProc
	ctrlArgs  []string // the controller's flags, as last started
}

// k8sToolsDir returns -k8s-tools, or the cache directory tools/k8s/build.sh
// names, and checks the binaries are there.
func k8sToolsDir(ctx context.Context) (string, error) {
	dir := *k8sToolsFlag
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		out, err := exec.CommandContext(ctx, filepath.Join(root, "tools", "k8s", "build.sh"), "--dir").Output()
		if err != nil {
			return "", fmt.Errorf("tools/k8s/build.sh --dir: %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range []string{"kube-apiserver", "etcd", "noop-controller"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s: %w (make k8s-tools builds it)", b, err)
		}
	}
	return dir, nil
}

// startK8sPeer starts etcd and kube-apiserver in a directory of their own
// under the bench's work directory (the disk PostgreSQL's data is on, which
// it checks), creates the namespaces and the two CRDs, and returns once both
// are served. The controller starts with startController.
func startK8sPeer(ctx context.Context, env *benchEnv, tools string, workers int, pgData string) (*k8sPeer, error) {
	p := &k8sPeer{env: env, tools: tools, workers: workers, dir: filepath.Join(env.workDir, fmt.Sprintf("k8s-%d", env.stackN))}
	if err := os.MkdirAll(filepath.Join(p.dir, "etcd"), 0o700); err != nil {
		return nil, err
	}
	p.settings = append(p.settings, fmt.Sprintf("etcd data directory %s (%s)", filepath.Join(p.dir, "etcd"), sameDisk(filepath.Join(p.dir, "etcd"), pgData)))
	cert, err := p.writeCerts()
	if err != nil {
		return nil, err
	}
	benchToken, userToken, err := p.writeTokens()
	if err != nil {
		return nil, err
	}
	if *peerUserFlag != "admin" && *peerUserFlag != "user" {
		return nil, fmt.Errorf("-peer-user %q: admin or user", *peerUserFlag)
	}
	clientAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	peerAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	etcdArgs := []string{"--name", "peer", "--data-dir", filepath.Join(p.dir, "etcd"),
		"--listen-client-urls", "http://" + clientAddr, "--advertise-client-urls", "http://" + clientAddr,
		"--listen-peer-urls", "http://" + peerAddr, "--initial-advertise-peer-urls", "http://" + peerAddr,
		"--initial-cluster", "peer=http://" + peerAddr, "--log-level", "warn"}
	etcd, err := env.startProc("etcd", filepath.Join(tools, "etcd"), etcdArgs...)
	if err != nil {
		return nil, err
	}
	if err := waitTCP(ctx, clientAddr, etcd); err != nil {
		return nil, err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(apiAddr)
	apiArgs := []string{"--etcd-servers", "http://" + clientAddr,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", port,
		"--tls-cert-file", p.caFile, "--tls-private-key-file", filepath.Join(p.dir, "tls.key"),
		"--token-auth-file", filepath.Join(p.dir, "tokens.csv"), "--authorization-mode", "Node,RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", filepath.Join(p.dir, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(p.dir, "sa.key"), "--service-cluster-ip-range", "10.96.0.0/12",
		// No Service endpoints on loopback (it refuses to advertise them).
		"--endpoint-reconciler-type", "none",
		"--v", "0"}
	api, err := env.startProc("kube-apiserver", filepath.Join(tools, "kube-apiserver"), apiArgs...)
	if err != nil {
		return nil, err
	}
	p.url = "https://" + apiAddr
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	p.load = &http.Client{Timeout: 60 * time.Second, Transport: client.BearerTransport(http1Transport(roots), benchToken, "")}
	p.watch = &http.Client{Transport: client.BearerTransport(http1Transport(roots), benchToken, "")}
	if err := waitFor(ctx, 120*time.Second, "kube-apiserver ready", api, func() error {
		status, body, err := p.do(ctx, http.MethodGet, "/readyz", "", nil)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", status, truncateBytes(body, 300))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	p.settings = append(p.settings, "etcd "+strings.Join(etcdArgs, " "), "kube-apiserver "+strings.Join(apiArgs, " "))
	for _, ns := range []string{"api", "list", "ready", "sat"} {
		if err := p.expect(ctx, http.MethodPost, "/api/v1/namespaces", "", map[string]any{"metadata": map[string]any{"name": ns}}, http.StatusCreated); err != nil {
			return nil, err
		}
	}
	for _, k := range [][2]string{{peerAPIKind, peerAPIPlural}, {peerReadyKind, peerReadyPlural}} {
		if err := p.createCRD(ctx, api, k[0], k[1]); err != nil {
			return nil, err
		}
	}
	if *peerUserFlag == "user" {
		if err := p.grantUser(ctx); err != nil {
			return nil, err
		}
		p.load = &http.Client{Timeout: 60 * time.Second, Transport: client.BearerTransport(http1Transport(roots), userToken, "")}
		p.watch = &http.Client{Transport: client.BearerTransport(http1Transport(roots), userToken, "")}
	}
	p.settings = append(p.settings, "the bench's user: "+*peerUserFlag)
	return p, nil
}

// grantUser lets the user bench-user do anything with the bench's kinds
// (a ClusterRole and its binding), and nothing else.
func (p *k8sPeer) grantUser(ctx context.Context) error {
	role := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "no8s-bench"},
		"rules":    []any{map[string]any{"apiGroups": []string{peerGroup}, "resources": []string{"*"}, "verbs": []string{"*"}}},
	}
	if err := p.expect(ctx, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterroles", "", role, http.StatusCreated); err != nil {
		return err
	}
	binding := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "no8s-bench"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "no8s-bench"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bench-user"}},
	}
	return p.expect(ctx, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "", binding, http.StatusCreated)
}

// sameDisk says whether dir is on the file system of PostgreSQL's data
// directory pg, as the peer's setup asks.
func sameDisk(dir, pg string) string {
	var a, b syscall.Stat_t
	if err := syscall.Stat(dir, &a); err != nil {
		return "device unknown: " + err.Error()
	}
	if err := syscall.Stat(pg, &b); err != nil {
		return "PostgreSQL's data directory not found at " + pg
	}
	if a.Dev == b.Dev {
		return "the file system of " + pg
	}
	return "NOT the file system of " + pg
}

// writeCerts writes a self-signed serving certificate for 127.0.0.1 and
// localhost (tls.crt, tls.key: the bench trusts it alone) and the service
// account signing key (sa.key).
func (p *k8sPeer) writeCerts() (*x509.Certificate, error) {
	cert, certFile, _, err := kubeapi.WriteServingCert(p.dir, "kube-apiserver (no8s-bench peer)")
	if err != nil {
		return nil, err
	}
	p.caFile = certFile
	return cert, kubeapi.WriteServiceAccountKey(filepath.Join(p.dir, "sa.key"))
}

// http1Transport is the bench's load transport: HTTP/1.1 with a pool of
// kept-alive connections (both sides are spoken to alike), over TLS when
// roots is not nil (trusting them alone).
func http1Transport(roots *x509.CertPool) *http.Transport {
	t := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	if roots != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return t
}

// writeTokens writes the API server's token file (the bench and the
// controller, both in system:masters, and bench-user, in no group) and the
// controller's token file, and returns the bench's and bench-user's tokens.
func (p *k8sPeer) writeTokens() (bench, user string, err error) {
	var toks [3]string
	for i := range toks {
		if _, _, toks[i], err = authn.NewToken(); err != nil {
			return "", "", err
		}
	}
	csv := fmt.Sprintf("%s,bench,bench,\"system:masters\"\n%s,noop-controller,noop-controller,\"system:masters\"\n%s,bench-user,bench-user\n", toks[0], toks[1], toks[2])
	if err := os.WriteFile(filepath.Join(p.dir, "tokens.csv"), []byte(csv), 0o600); err != nil {
		return "", "", err
	}
	p.tokenFile = filepath.Join(p.dir, "controller.token")
	return toks[0], toks[2], os.WriteFile(p.tokenFile, []byte(toks[1]), 0o600)
}

// createCRD creates the CRD of kind (plural) with the DatabaseCluster
// schema as its spec and a status subresource, and waits until it is
// established and its objects can be listed.
func (p *k8sPeer) createCRD(ctx context.Context, api *benchProc, kind, plural string) error {
	var spec map[string]any
	if err := json.Unmarshal([]byte(databaseClusterSchema), &spec); err != nil {
		return err
	}
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + peerGroup},
		"spec": map[string]any{
			"group": peerGroup,
			"scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": plural, "singular": strings.ToLower(kind), "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": peerVersion, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec":   spec,
						"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					},
				}},
			}},
		},
	}
	if err := p.expect(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "", crd, http.StatusCreated); err != nil {
		return err
	}
	return waitFor(ctx, 60*time.Second, "CRD "+plural+" served", api, func() error {
		status, body, err := p.do(ctx, http.MethodGet, p.path("default", plural, "")+"?limit=1", "", nil)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("%d %s", status, truncateBytes(body, 200))
		}
		return nil
	})
}

// path is the URL path of the objects of plural in ns, or of one of them.
func (p *k8sPeer) path(ns, plural, name string) string {
	s := "/apis/" + peerGroup + "/" + peerVersion + "/namespaces/" + ns + "/" + plural
	if name != "" {
		s += "/" + name
	}
	return s
}

// do sends one request to the API server and returns the status and body.
func (p *k8sPeer) do(ctx context.Context, method, path, contentType string, body any) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if rd != nil {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.load.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// expect sends one request and fails unless the answer is want.
func (p *k8sPeer) expect(ctx context.Context, method, path, contentType string, body any, want int) error {
	status, data, err := p.do(ctx, method, path, contentType, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if status != want {
		return fmt.Errorf("%s %s: %d %s", method, path, status, truncateBytes(data, 500))
	}
	return nil
}

// peerObjectTemplate is the peer's create body, the no8s one's labels,
// annotations and spec: %[1]s is the kind, %[2]s the name.
var peerObjectTemplate = func() string {
	labels, annotations, spec := benchObject()
	raw, err := json.Marshal(map[string]any{
		"apiVersion": peerGroup + "/" + peerVersion,
		"kind":       "KIND",
		"metadata":   map[string]any{"name": "NAME", "labels": labels, "annotations": annotations},
		"spec":       spec,
	})
	if err != nil {
		panic(err)
	}
	s := strings.Replace(string(raw), `"KIND"`, `"%[1]s"`, 1)
	return strings.Replace(s, `"NAME"`, `"%[2]s"`, 1)
}()

// create creates one object of kind (plural) named name in ns.
func (p *k8sPeer) create(ctx context.Context, ns, kind, plural, name string) error {
	return p.expect(ctx, http.MethodPost, p.path(ns, plural, ""), "", fmt.Appendf(nil, peerObjectTemplate, kind, name), http.StatusCreated)
}

// listAll lists the objects of plural in ns in pages of 1,000 and returns
// how many there were and in how many pages.
func (p *k8sPeer) listAll(ctx context.Context, ns, plural string) (items, pages int, err error) {
	items, pages, _, err = p.listPages(ctx, ns, plural, nil)
	return items, pages, err
}

// listPages lists the objects of plural in ns in pages of 1,000, handing
// each to each (when not nil) undecoded, and returns how many there were,
// in how many pages, and the list's resourceVersion.
func (p *k8sPeer) listPages(ctx context.Context, ns, plural string, each func(json.RawMessage) error) (items, pages int, rv string, err error) {
	cont := ""
	for {
		u := p.path(ns, plural, "") + "?limit=1000"
		if cont != "" {
			u += "&continue=" + url.QueryEscape(cont)
		}
		status, data, err := p.do(ctx, http.MethodGet, u, "", nil)
		if err != nil {
			return items, pages, "", fmt.Errorf("GET %s: %w", u, err)
		}
		if status != http.StatusOK {
			return items, pages, "", fmt.Errorf("GET %s: %d %s", u, status, truncateBytes(data, 500))
		}
		var page struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return items, pages, "", fmt.Errorf("GET %s: %w", u, err)
		}
		for _, it := range page.Items {
			if each != nil {
				if err := each(it); err != nil {
					return items, pages, "", err
				}
			}
		}
		items += len(page.Items)
		pages++
		if cont = page.Metadata.Continue; cont == "" {
			return items, pages, page.Metadata.ResourceVersion, nil
		}
	}
}

// patch changes the spec of one object (a JSON merge patch, as the no8s
// side sends).
func (p *k8sPeer) patch(ctx context.Context, ns, plural, name string) error {
	return p.expect(ctx, http.MethodPatch, p.path(ns, plural, name), "application/merge-patch+json", []byte(reconcilePatch), http.StatusOK)
}

// errWatchGone is a watch's resourceVersion too old for the API server
// (410 Gone): the watcher lists again.
var errWatchGone = errors.New("resourceVersion too old (410 Gone)")

// startWatch watches the objects of plural in ns, as an informer does: a
// list, then a watch from the list's resourceVersion, opened again from
// the last version seen whenever the API server ends it (it does, under
// load, with watchers that fall behind), and after a list again when that
// version is too old. It returns once the first watch is open.
func (p *k8sPeer) startWatch(ctx context.Context, ns, plural string, minGen int64) (*readyWatch, error) {
	return newReadyWatch(ctx, minGen, func(ctx context.Context, w *readyWatch, started func()) error {
		rv := ""
		for {
			if rv == "" {
				var err error
				if rv, err = p.relist(ctx, ns, plural, w); err != nil {
					return err
				}
			}
			next, err := p.watchFrom(ctx, ns, plural, rv, w, started)
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, errWatchGone):
				rv = ""
			case err != nil:
				return err
			default:
				rv = next
			}
			w.mu.Lock()
			w.restarts++
			w.mu.Unlock()
		}
	})
}

// relist lists every object of plural in ns, hands each to w (what changed
// while no watch ran) and returns the list's resourceVersion.
func (p *k8sPeer) relist(ctx context.Context, ns, plural string, w *readyWatch) (string, error) {
	now := time.Now()
	_, _, rv, err := p.listPages(ctx, ns, plural, func(raw json.RawMessage) error {
		var o k8sObject
		if err := json.Unmarshal(raw, &o); err != nil {
			return err
		}
		o.handTo(w, now)
		return nil
	})
	return rv, err
}

// watchFrom watches from rv until the API server ends the watch, and
// returns the last resourceVersion seen.
func (p *k8sPeer) watchFrom(ctx context.Context, ns, plural, rv string, w *readyWatch, started func()) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+p.path(ns, plural, "")+
		"?watch=1&allowWatchBookmarks=true&resourceVersion="+url.QueryEscape(rv), nil)
	if err != nil {
		return rv, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.watch.Do(req)
	if err != nil {
		return rv, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusGone {
		return rv, errWatchGone
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return rv, fmt.Errorf("watch: %d %s", resp.StatusCode, b)
	}
	started()
	return readK8sWatch(ctx, resp.Body, rv, w)
}

// k8sObject is as much of a watched object as the bench reads: its name,
// resourceVersion and conditions.
type k8sObject struct {
	Metadata struct {
		Name            string `json:"name"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Conditions []struct {
			Type               string `json:"type"`
			Status             string `json:"status"`
			ObservedGeneration int64  `json:"observedGeneration"`
		} `json:"conditions"`
	} `json:"status"`
	// Message and Code are an ERROR event's (a Status).
	Message string `json:"message"`
	Code    int    `json:"code"`
}

// handTo hands the object's Ready condition to w.
func (o *k8sObject) handTo(w *readyWatch, at time.Time) {
	for _, c := range o.Status.Conditions {
		if c.Type == "Ready" {
			w.seen(o.Metadata.Name, c.Status == "True", c.ObservedGeneration, at)
		}
	}
}

// readK8sWatch decodes a Kubernetes watch stream (one JSON event after the
// other), hands each object's Ready condition to w, and returns the last
// resourceVersion seen (rv before any) when the stream ends.
func readK8sWatch(ctx context.Context, body io.Reader, rv string, w *readyWatch) (string, error) {
	dec := json.NewDecoder(body)
	var ev struct {
		Type   string    `json:"type"`
		Object k8sObject `json:"object"`
	}
	for {
		ev.Type, ev.Object = "", k8sObject{}
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return rv, nil
			}
			return rv, err
		}
		now := time.Now()
		switch ev.Type {
		case "ERROR":
			if ev.Object.Code == http.StatusGone {
				return rv, errWatchGone
			}
			return rv, fmt.Errorf("ERROR event: %s", ev.Object.Message)
		case "ADDED", "MODIFIED":
			ev.Object.handTo(w, now)
		}
		if v := ev.Object.Metadata.ResourceVersion; v != "" {
			rv = v
		}
	}
}

// startController starts the noop controller on the kind ReconcileBench in
// ns and waits until it reports ready.
func (p *k8sPeer) startController(ctx context.Context, ns string) error {
	health, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{"--server", p.url, "--token-file", p.tokenFile, "--certificate-authority", p.caFile,
		"--group", peerGroup, "--api-version", peerVersion, "--kind", peerReadyKind, "--namespace", ns,
		"--max-concurrent-reconciles", strconv.Itoa(p.workers), "--qps", "-1", "--health-probe-bind-address", health}
	args = append(args, strings.Fields(*peerControllerArgsFlag)...)
	ctrl, err := p.env.startProc("noop-controller", filepath.Join(p.tools, "noop-controller"), args...)
	if err != nil {
		return err
	}
	p.ctrl = ctrl
	p.ctrlArgs = args
	hc := &http.Client{Timeout: 2 * time.Second}
	return waitFor(ctx, 60*time.Second, "noop-controller ready", ctrl, func() error {
		return getOK(hc, "http://"+health+"/readyz")
	})
}

// stopController stops the noop controller (SIGTERM).
func (p *k8sPeer) stopController() {
	if p.ctrl != nil {
		p.env.stopProc(p.ctrl)
		p.ctrl = nil
	}
}
