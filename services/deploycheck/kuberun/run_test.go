//go:build deploycheck

package kuberun_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/services/deploycheck/composerun"
	"github.com/no8s/no8s/services/deploycheck/helmcheck"
	"github.com/no8s/no8s/services/deploycheck/kuberun"
)

// The check's own values over each values file: the image under test, a
// datasource password registry-sync holds and the grant that lets a
// TenantRegistry send it to the database the flow fills (the bundled
// one's password fixed, so that the grant's password is its).
const bundledOverlay = `postgresql: {password: no8s-check}
registrySync:
  secretEnv: {NO8S_REGISTRY_DATASOURCE_PASSWORD: no8s-check}
credentialGrants:
  grants:
    - secret: {env: NO8S_REGISTRY_DATASOURCE_PASSWORD}
      use: datasource
      namespaces: ["*"]
      destinations: ["no8s-postgresql:5432"]
`

// TestRenderedTopology runs the chart's rendered objects for the default
// values and for ci/production.yaml (with a PostgreSQL and a NATS standing
// for the external ones it names, and the TLS Secret its gateways serve
// the API with: the flow checks their certificate), each pod in its own network namespace,
// and the flow through the gateway Service only: the README's, a
// TenantRegistry with children, an HttpSource, then SIGKILL of one replica
// of each stateless service and of the scheduler leader, after which a new
// resource is still Ready.
func TestRenderedTopology(t *testing.T) {
	s := newSetup(t)
	for name, c := range map[string]struct {
		values     []string
		production bool
	}{
		"default":    {[]string{s.identity, writeFile(t, "overlay.yaml", bundledOverlay), s.image}, false},
		"production": {[]string{s.identity, filepath.Join(s.helm.Chart, "ci", "production.yaml"), s.image}, true},
	} {
		t.Run(name, func(t *testing.T) {
			var existing, cas []byte
			if c.production {
				// The external PostgreSQL and NATS, and the gateways'
				// TLS Secret for the name they answer to.
				secret, ca, err := helmcheck.TLSSecret("no8s-gateway-tls", "no8s", "no8s.example.com")
				if err != nil {
					t.Fatal(err)
				}
				existing, cas = []byte(externals(t, s.identity)+"---\n"+string(secret)), ca
			}
			cfg := s.config(t, s.helm, existing, 4*time.Minute, c.values...)
			cfg.GatewayCAs = cas
			runFlow(t, cfg, (*composerun.Flow).Steps)
		})
	}
}

// TestUpgradeRenderedTopology: a release installed from the default
// values is filled with resources of every kind; then the same chart
// rendered as an upgrade (helm template --is-upgrade) runs on the same
// claims, as the previous revision's PostgreSQL and NATS would still run:
// the migration, now a pre-upgrade hook Job, completes before any
// Deployment's pod starts, and the earlier resources are read, updated and
// reach Ready, the registry and the source still syncing.
func TestUpgradeRenderedTopology(t *testing.T) {
	s := newSetup(t)
	values := []string{s.identity, writeFile(t, "overlay.yaml", bundledOverlay), s.image}
	cfg := s.config(t, s.helm, nil, 4*time.Minute, values...)
	// Not t.TempDir (0700): the database's and NATS's users must reach it.
	claims, err := os.MkdirTemp("", "no8s-kuberun-claims-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(claims) })
	if err := os.Chmod(claims, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.ClaimsDir = claims
	runFlow(t, cfg, (*composerun.Flow).Fill)
	manifests, err := s.helm.TemplateUpgrade(t.Context(), "no8s", cfg.Namespace, values...)
	if err != nil {
		t.Fatal(err)
	}
	top, err := kuberun.Read(manifests, cfg.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(top.Pods, func(p *kuberun.Pod) bool { return p.Hook && p.Name == "no8s-migrate" }) {
		t.Fatal("the upgrade's rendering has no pre-upgrade hook Job no8s-migrate")
	}
	cfg.Manifests, cfg.Upgrade = manifests, true
	runFlow(t, cfg, (*composerun.Flow).Upgraded)
}

// runFlow runs cfg's topology and, once every pod started, the flow's
// steps through it; a failure prints every pod's log's end.
func runFlow(t *testing.T, cfg kuberun.Config, steps func(*composerun.Flow, context.Context) error) {
	t.Helper()
	start := time.Now()
	r, err := kuberun.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("every pod started in %s", time.Since(start).Round(time.Millisecond))
	targets, err := r.Targets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &composerun.Flow{Run: r.Run, Targets: targets, Log: t.Logf}
	err = steps(f, t.Context())
	f.Close()
	if err != nil {
		for _, p := range r.Topology.Pods {
			t.Logf("%s log:\n%s", p.Name, r.LogTail(p.Name, 10))
		}
		t.Fatal(err)
	}
}

// setup is what every run shares: the chart, the identity values and
// their credentials, the image under test as values.
type setup struct {
	helm            helmcheck.Helm
	identity, image string
	creds, ref      string
}

func newSetup(t *testing.T) *setup {
	t.Helper()
	for _, k := range []string{"NO8S_IMAGE_REF", "NO8S_IMAGE_BINARIES", "NO8S_NATS_SERVER", "NO8S_K8S_TOOLS"} {
		if os.Getenv(k) == "" {
			t.Fatalf("%s is not set: run make deploy-check", k)
		}
	}
	chart, err := filepath.Abs("../../../deploy/helm/no8s")
	if err != nil {
		t.Fatal(err)
	}
	s := &setup{helm: helmcheck.Helm{Bin: filepath.Join(os.Getenv("NO8S_K8S_TOOLS"), "helm"), Chart: chart}, creds: t.TempDir(), ref: os.Getenv("NO8S_IMAGE_REF")}
	if s.identity, err = helmcheck.IdentityValues(s.creds); err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(s.ref, ":")
	s.image = writeFile(t, "image.yaml", fmt.Sprintf("image: {repository: %q, tag: %q}\n", repo, tag))
	return s
}

// config renders the chart of h with the values files into the runner's
// configuration (release no8s in namespace no8s).
func (s *setup) config(t *testing.T, h helmcheck.Helm, existing []byte, timeout time.Duration, values ...string) kuberun.Config {
	t.Helper()
	const ns = "no8s"
	manifests, err := h.Template(t.Context(), "no8s", ns, values...)
	if err != nil {
		t.Fatal(err)
	}
	return kuberun.Config{Manifests: manifests, Namespace: ns, Existing: existing,
		// The public name production.yaml's gateways answer to.
		DNS:   map[string]string{"no8s.example.com": "no8s-gateway." + ns},
		Image: s.ref, Binaries: strings.Fields(os.Getenv("NO8S_IMAGE_BINARIES")), NATSServer: os.Getenv("NO8S_NATS_SERVER"),
		StartTimeout: timeout, Credentials: filepath.Join(s.creds, "identity"), Log: testWriter{t}}
}

// TestBrokenRenderedTopology: copies of the chart with the store Service's
// port changed (its callers still dial 7001), its selector picking no pod,
// and the gateways' variable naming admission misspelt (they dial the
// default address) each fail the start, naming the first pod that cannot
// become ready.
func TestBrokenRenderedTopology(t *testing.T) {
	s := newSetup(t)
	for name, c := range map[string]struct{ file, old, new, pod string }{
		"service port": {"services.yaml", `(dict "name" "grpc" "port" 7001)`, `(dict "name" "grpc" "port" 7001 "servicePort" 7011)`, "no8s-admission-0"},
		"selector": {"_workload.tpl", "spec:\n  type: {{ .serviceType | default \"ClusterIP\" }}\n  selector:\n",
			"spec:\n  type: {{ .serviceType | default \"ClusterIP\" }}\n  selector:\n    tier: api\n", "no8s-admission-0"},
		"env name": {"services.yaml", "- name: NO8S_ADMISSION_ADDR", "- name: NO8S_ADMISION_ADDR", "no8s-gateway-0"},
	} {
		t.Run(name, func(t *testing.T) {
			broken := filepath.Join(t.TempDir(), "no8s")
			if err := helmcheck.CopyChart(s.helm.Chart, broken); err != nil {
				t.Fatal(err)
			}
			if err := helmcheck.Edit(filepath.Join(broken, "templates", c.file), c.old, c.new); err != nil {
				t.Fatal(err)
			}
			h := helmcheck.Helm{Bin: s.helm.Bin, Chart: broken}
			r, err := kuberun.Start(t.Context(), s.config(t, h, nil, 75*time.Second, s.identity, writeFile(t, "overlay.yaml", bundledOverlay), s.image))
			if err == nil {
				_ = r.Close()
				t.Fatalf("the chart with a broken %s started", name)
			}
			var step *composerun.StepError
			if !errors.As(err, &step) || step.Step != "start" || !slices.Contains(step.Services, c.pod) {
				t.Fatalf("the chart with a broken %s: %v\nwant the start to fail naming %s", name, err, c.pod)
			}
			t.Logf("refused as it should be: %s", firstLine(err.Error()))
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// externals are the PostgreSQL and the NATS ci/production.yaml names
// (postgres.databases, nats.messaging), as a platform team would run
// them: PostgreSQL with the user and password of its URL, NATS with
// deploy/nats/nats-server.conf and the identity values' include.
func externals(t *testing.T, identityValues string) string {
	t.Helper()
	conf, err := os.ReadFile("../../../deploy/nats/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	natsAuth, err := helmcheck.NATSAuth(identityValues)
	if err != nil {
		t.Fatal(err)
	}
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "postgres", "namespace": "databases"},
			"spec": map[string]any{"selector": map[string]any{"app": "postgres"}, "ports": []any{map[string]any{"port": 5432, "targetPort": "postgres"}}}},
		{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": "postgres", "namespace": "databases"},
			"spec": map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "postgres"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "postgres"}}, "spec": map[string]any{
					"containers": []any{map[string]any{"name": "postgres", "image": "postgres:16",
						"env": []any{map[string]any{"name": "POSTGRES_USER", "value": "no8s"}, map[string]any{"name": "POSTGRES_PASSWORD", "value": "change-me"},
							map[string]any{"name": "POSTGRES_DB", "value": "no8s"}},
						"ports":          []any{map[string]any{"name": "postgres", "containerPort": 5432}},
						"readinessProbe": map[string]any{"exec": map[string]any{"command": []string{"pg_isready", "-U", "no8s", "-d", "no8s"}}, "periodSeconds": 2}}}}}}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "nats", "namespace": "messaging"},
			"data": map[string]any{"nats-server.conf": string(conf), "no8s-auth.conf": natsAuth}},
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "nats", "namespace": "messaging"},
			"spec": map[string]any{"selector": map[string]any{"app": "nats"}, "ports": []any{map[string]any{"port": 4222, "targetPort": "client"}}}},
		{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": "nats", "namespace": "messaging"},
			"spec": map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "nats"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "nats"}}, "spec": map[string]any{
					"securityContext": map[string]any{"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
					"containers": []any{map[string]any{"name": "nats", "image": "nats:2.10", "args": []string{"-c", "/etc/nats/nats-server.conf"},
						"ports":          []any{map[string]any{"name": "client", "containerPort": 4222}, map[string]any{"name": "monitor", "containerPort": 8222}},
						"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "monitor"}, "periodSeconds": 2},
						"volumeMounts": []any{map[string]any{"name": "config", "mountPath": "/etc/nats", "readOnly": true},
							map[string]any{"name": "data", "mountPath": "/data"}}}},
					"volumes": []any{map[string]any{"name": "config", "configMap": map[string]any{"name": "nats"}},
						map[string]any{"name": "data", "emptyDir": map[string]any{}}}}}}},
	}
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
