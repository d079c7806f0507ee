//go:build deploycheck

package kubeapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// toolsEnv names the variable holding the folder of etcd and
// kube-apiserver for these tests.
const toolsEnv = "NO8S_K8S_TOOLS"

// One API server for the package's tests: started by the first test that
// asks, stopped by TestMain.
var shared struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	dir    string
	srv    *Server
	err    error
}

func TestMain(m *testing.M) {
	shared.ctx, shared.cancel = context.WithCancel(context.Background())
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	shared.cancel() // kills whatever Close left
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// server returns the shared API server, starting it on first use; the
// test fails when NO8S_K8S_TOOLS is unset or the server does not start.
func server(t *testing.T) *Server {
	t.Helper()
	shared.once.Do(func() {
		tools := os.Getenv(toolsEnv)
		if tools == "" {
			shared.err = fmt.Errorf("%s is unset: run `make k8s-tools` and set %s=$(tools/k8s/build.sh --dir)", toolsEnv, toolsEnv)
			return
		}
		if shared.dir, shared.err = os.MkdirTemp("", "kubeapi-test-"); shared.err != nil {
			return
		}
		start := time.Now()
		shared.srv, shared.err = Start(shared.ctx, Options{ToolsDir: tools, Dir: shared.dir, Log: os.Stderr})
		fmt.Fprintf(os.Stderr, "kubeapi: etcd and kube-apiserver started in %s\n", time.Since(start).Round(time.Millisecond))
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// namespace creates a namespace for one test, PodSecurity's restricted
// level enforced and warned about.
func namespace(t *testing.T, s *Server, name string) string {
	t.Helper()
	if err := s.CreateNamespace(t.Context(), name, map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// deployment is a Deployment named name whose container has securityContext
// (YAML indented for the container).
func deployment(name, securityContext string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  labels: {app: ` + name + `}
spec:
  replicas: 1
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
      containers:
        - name: app
          image: example.com/app:1.0
          ports: [{containerPort: 8080}]
` + securityContext
}

// restricted is a container securityContext PodSecurity's restricted level
// accepts.
const restricted = `          securityContext:
            runAsNonRoot: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
            seccompProfile: {type: RuntimeDefault}
`

// TestPodSecurityWarning: a Deployment whose pod template runs as root
// with the defaults is accepted (a Deployment is not a Pod: restricted is
// enforced on Pods only) with PodSecurity's warning.
func TestPodSecurityWarning(t *testing.T) {
	s := server(t)
	ns := namespace(t, s, "psa-warn")
	warnings, err := s.ApplyDryRun(t.Context(), ns, []byte("---\n# Source: chart/templates/deployment.yaml\n"+deployment("rooty", "")))
	if err != nil {
		t.Fatalf("ApplyDryRun: %v", err)
	}
	t.Logf("warnings: %q", warnings)
	found := false
	for _, w := range warnings {
		if strings.HasPrefix(w, "Deployment/rooty: ") && strings.Contains(w, `violate PodSecurity "restricted`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no PodSecurity warning for Deployment/rooty among %q", warnings)
	}
}

// TestCompliant: a compliant Deployment, its Service and a ConfigMap apply
// with no warning, and nothing is stored (dry run).
func TestCompliant(t *testing.T) {
	s := server(t)
	ns := namespace(t, s, "compliant")
	stream := "# Source: chart/templates/deployment.yaml\n" + deployment("web", restricted) + `---
# Source: chart/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
# Source: chart/templates/empty.yaml
---
# Source: chart/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
data:
  key: value
`
	warnings, err := s.ApplyDryRun(t.Context(), ns, []byte(stream))
	if err != nil {
		t.Fatalf("ApplyDryRun: %v", err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %q", warnings)
	}
	for _, path := range []string{
		"/apis/apps/v1/namespaces/" + ns + "/deployments/web",
		"/api/v1/namespaces/" + ns + "/services/web",
		"/api/v1/namespaces/" + ns + "/configmaps/web",
	} {
		status, body, _, err := s.Do(t.Context(), http.MethodGet, path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusNotFound {
			t.Errorf("GET %s after a dry run: %d %s, want 404", path, status, truncate(body, 200))
		}
	}
}

// TestRefused: a Service with a port out of range is refused, named with
// the API server's message, and the stream's other objects still apply.
func TestRefused(t *testing.T) {
	s := server(t)
	ns := namespace(t, s, "refused")
	stream := `apiVersion: v1
kind: ConfigMap
metadata: {name: fine}
---
apiVersion: v1
kind: Service
metadata:
  name: bad-port
spec:
  ports: [{port: 70000}]
`
	_, err := s.ApplyDryRun(t.Context(), ns, []byte(stream))
	if err == nil {
		t.Fatal("ApplyDryRun accepted a Service with port 70000")
	}
	t.Logf("error: %v", err)
	msg := err.Error()
	if !strings.Contains(msg, "Service/bad-port") || !strings.Contains(msg, "70000") || !strings.Contains(msg, "must be between 1 and 65535") {
		t.Errorf("error %q names neither Service/bad-port nor the API server's message", msg)
	}
	if strings.Contains(msg, "ConfigMap/fine") {
		t.Errorf("error %q names the valid ConfigMap", msg)
	}
}

// TestUnknownKind: a kind the API server does not serve is an error naming
// it.
func TestUnknownKind(t *testing.T) {
	s := server(t)
	ns := namespace(t, s, "unknown-kind")
	for _, apiVersion := range []string{"example.com/v1", "v1", "apps/v1"} {
		stream := "apiVersion: " + apiVersion + "\nkind: Frobnicator\nmetadata: {name: frob}\n"
		_, err := s.ApplyDryRun(t.Context(), ns, []byte(stream))
		if err == nil {
			t.Fatalf("ApplyDryRun accepted a Frobnicator (%s)", apiVersion)
		}
		t.Logf("%s: %v", apiVersion, err)
		if !strings.Contains(err.Error(), "Frobnicator/frob") || !strings.Contains(err.Error(), "unknown kind Frobnicator") {
			t.Errorf("error %q does not name the unknown kind", err)
		}
	}
}

// TestMalformed: a stream that does not parse is an error saying where,
// and none of its objects is applied (the valid ConfigMap is not seen:
// the namespace it names does not exist, which the API would refuse).
func TestMalformed(t *testing.T) {
	s := server(t)
	ns := namespace(t, s, "malformed")
	stream := `apiVersion: v1
kind: ConfigMap
metadata: {name: fine, namespace: no-such-namespace}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: broken
data: [
`
	warnings, err := s.ApplyDryRun(t.Context(), ns, []byte(stream))
	if err == nil {
		t.Fatal("ApplyDryRun accepted malformed YAML")
	}
	t.Logf("error: %v", err)
	msg := err.Error()
	if !strings.Contains(msg, "nothing applied") || !strings.Contains(msg, "document at line 5") {
		t.Errorf("error %q does not say which document and that nothing was applied", msg)
	}
	if strings.Contains(msg, "no-such-namespace") || len(warnings) > 0 {
		t.Errorf("the valid document was applied: %q, warnings %q", msg, warnings)
	}
}
