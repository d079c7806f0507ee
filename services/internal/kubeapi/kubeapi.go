package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/no8s/no8s/services/internal/authn"
)

// Bounds of Start and Close.
const (
	readyTimeout = 120 * time.Second // etcd and kube-apiserver, each
	stopTimeout  = 15 * time.Second  // each process, between SIGTERM and SIGKILL
	logTail      = 2000              // bytes of a log quoted in an error
)

// Options says where the tools are and where the server keeps its files.
type Options struct {
	// ToolsDir holds the etcd and kube-apiserver binaries (`make
	// k8s-tools` builds them; tools/k8s/build.sh --dir names the folder).
	ToolsDir string
	// Dir is the work directory: etcd's data, the certificates, the token
	// file and each process's log (etcd.log, kube-apiserver.log). It must
	// exist; the caller removes it (t.TempDir, say).
	Dir string
	// Log, when not nil, gets a line for each step of Start and Close
	// (which process started, its log file, how long it took to be
	// ready). The processes' own output goes to their log files only; an
	// error of Start quotes the tail of the log of the process at fault.
	Log io.Writer
}

// Server is a running etcd and kube-apiserver pair on loopback.
type Server struct {
	// URL is the API server's base URL (https://127.0.0.1:PORT).
	URL string
	// CAFile is the PEM file of the certificate the API server serves,
	// which a client trusts alone.
	CAFile string
	// Token is the bearer token of a system:masters user.
	Token string

	log       io.Writer
	client    *http.Client
	procs     []*process // in start order; stopped in reverse
	closeOnce sync.Once
	closeErr  error

	mu        sync.Mutex
	discovery map[string][]apiResource // by group/version
}

// Start starts etcd and kube-apiserver on free loopback ports and returns
// once the API server's /readyz answers 200. Each process gets at most
// 120 s; Start fails as soon as one of them exits. The processes run until
// Close, or until ctx ends (they are then killed), whichever comes first:
// the caller calls Close in every case.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.ToolsDir == "" || o.Dir == "" {
		return nil, errors.New("kubeapi: Options.ToolsDir and Options.Dir are required")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(o.ToolsDir, b)); err != nil {
			return nil, fmt.Errorf("kubeapi: %w (make k8s-tools builds it)", err)
		}
	}
	s := &Server{log: o.Log, discovery: map[string][]apiResource{}}
	if err := s.start(ctx, o); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// start writes the key material and the token file, then starts etcd and
// kube-apiserver and waits for each.
func (s *Server) start(ctx context.Context, o Options) error {
	cert, certFile, keyFile, err := WriteServingCert(o.Dir, "kube-apiserver (no8s kubeapi)")
	if err != nil {
		return err
	}
	s.CAFile = certFile
	saKey := filepath.Join(o.Dir, "sa.key")
	if err := WriteServiceAccountKey(saKey); err != nil {
		return err
	}
	if _, _, s.Token, err = authn.NewToken(); err != nil {
		return err
	}
	tokens := filepath.Join(o.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, fmt.Appendf(nil, "%s,no8s-check,no8s-check,\"system:masters\"\n", s.Token), 0o600); err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	s.client = &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			Proxy:             nil,
			DialContext:       (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
			IdleConnTimeout:   90 * time.Second,
		},
	}

	etcdData := filepath.Join(o.Dir, "etcd")
	if err := os.MkdirAll(etcdData, 0o700); err != nil {
		return err
	}
	clientAddr, err := freeAddr()
	if err != nil {
		return err
	}
	peerAddr, err := freeAddr()
	if err != nil {
		return err
	}
	etcd, err := s.startProcess(ctx, o, "etcd",
		"--name", "check", "--data-dir", etcdData,
		"--listen-client-urls", "http://"+clientAddr, "--advertise-client-urls", "http://"+clientAddr,
		"--listen-peer-urls", "http://"+peerAddr, "--initial-advertise-peer-urls", "http://"+peerAddr,
		"--initial-cluster", "check=http://"+peerAddr, "--log-level", "warn")
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx, etcd, "etcd on "+clientAddr, func(ctx context.Context) error {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", clientAddr)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		return err
	}

	apiAddr, err := freeAddr()
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(apiAddr)
	api, err := s.startProcess(ctx, o, "kube-apiserver",
		"--etcd-servers", "http://"+clientAddr,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", port,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--token-auth-file", tokens, "--authorization-mode", "Node,RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.96.0.0/12",
		// No Service endpoints on loopback (it refuses to advertise them).
		"--endpoint-reconciler-type", "none",
		"--v", "0")
	if err != nil {
		return err
	}
	s.URL = "https://" + apiAddr
	return s.waitFor(ctx, api, "kube-apiserver /readyz", func(ctx context.Context) error {
		status, body, _, err := s.Do(ctx, http.MethodGet, "/readyz", "", nil)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", status, truncate(body, 300))
		}
		return nil
	})
}

// Close stops the processes, the API server first: SIGTERM to each one's
// process group, then SIGKILL if it has not exited within 15 s. It returns
// an error naming each process that had to be killed. Calls after the
// first return the first's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for i := len(s.procs) - 1; i >= 0; i-- {
			p := s.procs[i]
			start := time.Now()
			if !p.stop() {
				errs = append(errs, fmt.Errorf("kubeapi: %s did not stop within %s of SIGTERM: killed (log %s)", p.name, stopTimeout, p.logPath))
			}
			s.logf("%s stopped in %s", p.name, time.Since(start).Round(time.Millisecond))
		}
		if s.client != nil {
			s.client.CloseIdleConnections()
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Do sends one request to the API server as a system:masters user and
// returns the status, the body and the text of every Warning header
// (`299 - "text"` gives text). The body, when not nil, is sent with
// contentType (application/json when empty). A status other than 2xx is
// not an error: the caller reads it.
func (s *Server) Do(ctx context.Context, method, path, contentType string, body []byte) (status int, respBody []byte, warnings []string, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	respBody, err = io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, respBody, parseWarnings(resp.Header.Values("Warning")), nil
}

// CreateNamespace creates the namespace name with labels (none when nil).
func (s *Server) CreateNamespace(ctx context.Context, name string, labels map[string]string) error {
	meta := map[string]any{"name": name}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
	if err != nil {
		return err
	}
	status, resp, _, err := s.Do(ctx, http.MethodPost, "/api/v1/namespaces", "", body)
	if err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	if status != http.StatusCreated {
		return fmt.Errorf("create namespace %s: %d %s", name, status, statusMessage(resp))
	}
	return nil
}

// statusMessage is the message of a Kubernetes Status body, or the body
// itself (shortened) when it is not one.
func statusMessage(body []byte) string {
	var st struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != "" {
		return st.Message
	}
	return truncate(body, 500)
}

// truncate returns b as a string of at most n bytes, marked when cut.
func truncate(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// logf writes one line to Options.Log, if any.
func (s *Server) logf(format string, args ...any) {
	if s.log != nil {
		fmt.Fprintf(s.log, "kubeapi: "+format+"\n", args...)
	}
}

// process is one started binary: its own process group, its output in a
// log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when it has exited
	err     error         // Wait's result, once done is closed
}

// startProcess starts the tool name with args in a process group of its
// own, its output in Dir/<name>.log. The group is killed when ctx ends,
// and the process is killed should this one die first (Pdeathsig).
func (s *Server) startProcess(ctx context.Context, o Options, name string, args ...string) (*process, error) {
	p := &process{name: name, logPath: filepath.Join(o.Dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.CommandContext(ctx, filepath.Join(o.ToolsDir, name), args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.cmd.Cancel = func() error { return p.signal(syscall.SIGKILL) }
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("kubeapi: start %s: %w", name, err)
	}
	s.procs = append(s.procs, p)
	s.logf("%s started (pid %d, log %s)", name, p.cmd.Process.Pid, p.logPath)
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to p's process group.
func (p *process) signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop sends SIGTERM to p's group and waits for p to exit, then SIGKILL
// after stopTimeout. It reports whether SIGTERM was enough.
func (p *process) stop() bool {
	// Once p has been waited for, its pid may be another's: no signal then
	// (etcd and kube-apiserver start no children of their own).
	select {
	case <-p.done:
		return true
	default:
	}
	_ = p.signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		_ = p.signal(syscall.SIGKILL)
		<-p.done
		return false
	}
}

// tail is the end of p's log, for an error.
func (p *process) tail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	b = bytes.TrimSpace(b)
	if len(b) > logTail {
		b = b[len(b)-logTail:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	if len(b) == 0 {
		return "(empty log)"
	}
	return string(b)
}

// waitFor polls probe until it succeeds, and fails when p exits, ctx ends
// or readyTimeout passes; the error quotes the tail of p's log.
func (s *Server) waitFor(ctx context.Context, p *process, what string, probe func(context.Context) error) error {
	start := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, readyTimeout, fmt.Errorf("not ready within %s", readyTimeout))
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := probe(pctx)
		pcancel()
		if err == nil {
			s.logf("%s ready in %s", what, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("kubeapi: %s exited (%v) while waiting for %s; the end of %s:\n%s", p.name, p.err, what, p.logPath, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("kubeapi: waiting for %s: %w (last: %v); the end of %s:\n%s", what, context.Cause(ctx), err, p.logPath, p.tail())
		case <-tick.C:
		}
	}
}

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// WriteKubeconfig writes a kubeconfig for the API server's system:masters
// user to path (mode 0600), for tools such as helm.
func (s *Server) WriteKubeconfig(path string) error {
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: loopback
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: loopback
  context: {cluster: loopback, user: admin}
current-context: loopback
`, s.URL, s.CAFile, s.Token)
	return os.WriteFile(path, []byte(conf), 0o600)
}
