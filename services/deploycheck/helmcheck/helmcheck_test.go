//go:build deploycheck

package helmcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/services/deploycheck/kuberun"
	"github.com/no8s/no8s/services/internal/kubeapi"
	"github.com/no8s/no8s/services/internal/manifest"
)

// The chart, the API server and the identity values every test shares:
// one kube-apiserver for the package, each check in a namespace of its own.
var (
	helm     Helm
	api      *kubeapi.Server
	identity string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tools := os.Getenv("NO8S_K8S_TOOLS")
	if tools == "" {
		fmt.Fprintln(os.Stderr, "NO8S_K8S_TOOLS is not set: run `make k8s-tools` and set it to `make -s k8s-tools-dir` (make deploy-check does both)")
		return 1
	}
	chart, err := filepath.Abs("../../../deploy/helm/no8s")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	helm = Helm{Bin: filepath.Join(tools, "helm"), Chart: chart}
	dir, err := os.MkdirTemp("", "no8s-helmcheck-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if identity, err = IdentityValues(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	if err := os.Mkdir(filepath.Join(dir, "kube"), 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if api, err = kubeapi.Start(ctx, kubeapi.Options{ToolsDir: tools, Dir: filepath.Join(dir, "kube"), Log: io.Discard}); err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver:", err)
		return 1
	}
	defer api.Close()
	fmt.Printf("kube-apiserver and etcd ready in %s\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

// TestChartValuesFiles: helm lint, helm template and the server-side dry
// run accept the default values and the production file in a restricted
// namespace, with no Warning.
func TestChartValuesFiles(t *testing.T) {
	deployments := []string{"no8s-admission", "no8s-gateway", "no8s-reconciler-noop", "no8s-reconciler-tenant", "no8s-registry-sync", "no8s-scheduler", "no8s-store"}
	for name, c := range map[string]struct {
		values       []string
		replicas     int
		statefulSets []string
		job          string // the migration Job
		hook         bool   // a pre-install,pre-upgrade hook
		// The gateways' probe scheme: HTTPS with gateway.tlsSecret.
		gatewayScheme string
	}{
		"default":    {[]string{identity}, 2, []string{"no8s-nats", "no8s-postgresql"}, "no8s-migrate-1", false, "HTTP"},
		"production": {[]string{identity, filepath.Join(helm.Chart, "ci", "production.yaml")}, 3, nil, "no8s-migrate", true, "HTTPS"},
	} {
		t.Run(name, func(t *testing.T) {
			var existing []byte
			if name == "production" {
				existing = gatewayTLSSecret(t, "no8s-"+name)
			}
			if err := Check(t.Context(), helm, api, "no8s-"+name, existing, c.values...); err != nil {
				t.Fatal(err)
			}
			manifests, err := helm.Template(t.Context(), "no8s", "no8s-"+name, c.values...)
			if err != nil {
				t.Fatal(err)
			}
			objs := rendered(t, manifests)
			if got := objs.names("Deployment"); !slices.Equal(got, deployments) {
				t.Errorf("Deployments %v, want %v", got, deployments)
			}
			for _, d := range deployments {
				if o := objs.get("Deployment", d); o != nil && o.Spec.Replicas != c.replicas {
					r := o.Spec.Replicas
					t.Errorf("Deployment %s: %d replicas, want %d", d, r, c.replicas)
				}
			}
			if got := objs.names("StatefulSet"); !slices.Equal(got, c.statefulSets) {
				t.Errorf("StatefulSets %v, want %v", got, c.statefulSets)
			}
			top, err := kuberun.Read(kuberun.Documents(existing, manifests), "no8s-"+name)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range top.Pods {
				checkPodFiles(t, p)
			}
			for _, p := range top.Pods {
				if strings.HasPrefix(p.Name, "no8s-gateway-") && p.Readiness.Scheme != c.gatewayScheme {
					t.Errorf("pod %s: readiness probe over %q, want %q", p.Name, p.Readiness.Scheme, c.gatewayScheme)
				}
			}
			job := objs.get("Job", c.job)
			if job == nil {
				t.Fatalf("no Job %s among %v", c.job, objs.names("Job"))
			}
			if hook := job.Metadata.Annotations["helm.sh/hook"]; (hook == "pre-install,pre-upgrade") != c.hook {
				t.Errorf("Job %s: helm.sh/hook %q, want a pre-install,pre-upgrade hook: %v", c.job, hook, c.hook)
			}
		})
	}
}

// gatewayTLSSecret is the kubernetes.io/tls Secret ci/production.yaml's
// gateway.tlsSecret names, in namespace ns, as cert-manager would keep it.
func gatewayTLSSecret(t *testing.T, ns string) []byte {
	t.Helper()
	secret, _, err := TLSSecret("no8s-gateway-tls", ns, "no8s.example.com")
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestCheckNeedsTheGatewayTLSSecret: the production file without the TLS
// Secret its gateway.tlsSecret names fails the check, naming it.
func TestCheckNeedsTheGatewayTLSSecret(t *testing.T) {
	err := Check(t.Context(), helm, api, "no8s-no-tls-secret", nil, identity, filepath.Join(helm.Chart, "ci", "production.yaml"))
	if err == nil || !strings.Contains(err.Error(), "no8s-gateway-tls") {
		t.Fatalf("check of the production file without its TLS Secret: %v\nwant an error naming no8s-gateway-tls", err)
	}
}

// object is what the tests read of a rendered object.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"spec"`
}

type objects []*object

// rendered parses helm template's output.
func rendered(t *testing.T, manifests []byte) objects {
	t.Helper()
	var objs objects
	for _, c := range manifest.Split(manifests) {
		var o object
		if err := yaml.Unmarshal(c.Data, &o); err != nil {
			t.Fatalf("rendered document at line %d: %v", c.Line, err)
		}
		if o.Kind != "" {
			objs = append(objs, &o)
		}
	}
	return objs
}

// names lists the names of the objects of kind, sorted.
func (objs objects) names(kind string) []string {
	var names []string
	for _, o := range objs {
		if o.Kind == kind {
			names = append(names, o.Metadata.Name)
		}
	}
	slices.Sort(names)
	return names
}

func (objs objects) get(kind, name string) *object {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	return nil
}

// TestCheckFailsWithoutRunAsNonRoot: the same check of a copy of the chart
// whose security context template lost runAsNonRoot fails with the API
// server's PodSecurity warning.
func TestCheckFailsWithoutRunAsNonRoot(t *testing.T) {
	broken := copyChart(t, helm.Chart)
	path := filepath.Join(broken, "templates", "_helpers.tpl")
	edit(t, path, "runAsNonRoot: true\n", "")
	err := Check(t.Context(), Helm{Bin: helm.Bin, Chart: broken}, api, "no8s-broken-nonroot", nil, identity)
	if err == nil || !strings.Contains(err.Error(), `violate PodSecurity "restricted`) || !strings.Contains(err.Error(), "runAsNonRoot") {
		t.Fatalf("check of the chart without runAsNonRoot: %v; want the PodSecurity warning naming runAsNonRoot", err)
	}
}

// TestValuesSchemaRefusals: values.schema.json makes helm lint and helm
// template refuse bad values, each naming what is wrong.
func TestValuesSchemaRefusals(t *testing.T) {
	for name, c := range map[string]struct{ values, want string }{
		"negative replicas":  {"store:\n  replicas: -1\n", "/store/replicas"},
		"no database url":    {"postgresql:\n  enabled: false\n", "externalDatabase"},
		"unknown key":        {"gatewy:\n  replicas: 2\n", "gatewy"},
		"non-string tag":     {"image:\n  tag: 1.2\n", "/image/tag"},
		"unknown reconciler": {"reconcilers:\n  - {name: x, command: frobnicate, replicas: 1}\n", "/reconcilers/0/command"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(bad, []byte(c.values), 0o600); err != nil {
				t.Fatal(err)
			}
			err := helm.Lint(t.Context(), identity, bad)
			if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm lint with %q: %v; want a schema refusal naming %s", c.values, err, c.want)
			}
			_, err = helm.Template(t.Context(), "no8s", "default", identity, bad)
			if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template with %q: %v; want a schema refusal naming %s", c.values, err, c.want)
			}
		})
	}
}

// TestChartNeedsTheIdentityValues: without the identity values the chart
// refuses to render, saying which command writes them.
func TestChartNeedsTheIdentityValues(t *testing.T) {
	_, err := helm.Template(t.Context(), "no8s", "default")
	if err == nil || !strings.Contains(err.Error(), "no8s identity ensure") {
		t.Fatalf("helm template without identity values: %v; want the command that writes them", err)
	}
}

// copyChart copies the chart into a temporary directory.
func copyChart(t *testing.T, chart string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "no8s")
	if err := CopyChart(chart, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit replaces every old in the file with new, failing when there is none.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	if err := Edit(path, old, new); err != nil {
		t.Fatal(err)
	}
}

// TestChartRefusesReconcilersItCannotRun: a reconciler whose credentials
// the identity values lack, and a built-in reconciler under another name,
// fail the rendering, each saying what to do.
func TestChartRefusesReconcilersItCannotRun(t *testing.T) {
	for values, want := range map[string]string{
		"reconcilers:\n  - {name: extra, command: noop, types: [Extra/v1], replicas: 1}\n": `identity.credentials has no "reconciler-extra"`,
		"reconcilers:\n  - {name: tenants, command: tenant, replicas: 1}\n":                `name it "tenant"`,
	} {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(bad, []byte(values), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := helm.Template(t.Context(), "no8s", "default", identity, bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("helm template with %q: %v; want %s", values, err, want)
		}
	}
}

// TestInstallAndUpgradeKeepThePostgresPassword: `helm install` and `helm
// upgrade` for real against the API server (objects stored, no pod runs
// without a kubelet, hence --no-hooks): the bundled PostgreSQL's random
// password is chosen once, at install, and kept by the upgrade (the chart
// looks it up), and the stores' database URL carries it both times.
func TestInstallAndUpgradeKeepThePostgresPassword(t *testing.T) {
	ctx := t.Context()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	const ns = "no8s-install"
	if err := api.CreateNamespace(ctx, ns, RestrictedLabels); err != nil {
		t.Fatal(err)
	}
	secrets := func() (password, url string) {
		t.Helper()
		read := func(name, key string) string {
			status, body, _, err := api.Do(ctx, "GET", "/api/v1/namespaces/"+ns+"/secrets/"+name, "", nil)
			if err != nil || status != 200 {
				t.Fatalf("secret %s: %d %v %s", name, status, err, body)
			}
			var s struct {
				Data map[string][]byte `json:"data"`
			}
			if err := json.Unmarshal(body, &s); err != nil {
				t.Fatal(err)
			}
			return string(s.Data[key])
		}
		return read("no8s-postgresql", "password"), read("no8s-database", "url")
	}
	if _, err := helm.run(ctx, "install", "no8s", helm.Chart, "--kubeconfig", kubeconfig, "--namespace", ns, "--no-hooks", "-f", identity); err != nil {
		t.Fatal(err)
	}
	pw, url := secrets()
	if len(pw) < 24 || !strings.Contains(url, ":"+pw+"@no8s-postgresql:5432/") {
		t.Fatalf("after install: password %q, database URL %q; want a random password in the URL", pw, url)
	}
	status, body, _, err := api.Do(ctx, "GET", "/apis/apps/v1/namespaces/"+ns+"/deployments", "", nil)
	if err != nil || status != 200 || !strings.Contains(string(body), "no8s-gateway") {
		t.Fatalf("the release's Deployments: %d %v", status, err)
	}
	if _, err := helm.run(ctx, "upgrade", "no8s", helm.Chart, "--kubeconfig", kubeconfig, "--namespace", ns, "--no-hooks", "-f", identity, "--set", "store.replicas=3"); err != nil {
		t.Fatal(err)
	}
	pw2, url2 := secrets()
	if pw2 != pw || url2 != url {
		t.Fatalf("the upgrade changed the database password or URL: %q → %q", url, url2)
	}
}

// TestCheckFailsOnBrokenWiring: copies of the chart with a Service port
// its callers do not use, a Service selector that picks no pod, and an
// environment variable referencing a Secret key that does not exist each
// fail the check, naming what is broken.
func TestCheckFailsOnBrokenWiring(t *testing.T) {
	for name, c := range map[string]struct{ file, old, new, want string }{
		"service port": {"services.yaml", `(dict "name" "grpc" "port" 7001)`, `(dict "name" "grpc" "port" 7011)`,
			"env NO8S_STORE_ADDR: no8s-store:7001: Service no8s-store has no port 7001"},
		"selector": {"_workload.tpl", "spec:\n  type: {{ .serviceType | default \"ClusterIP\" }}\n  selector:\n", "spec:\n  type: {{ .serviceType | default \"ClusterIP\" }}\n  selector:\n    tier: api\n",
			"Service no8s-store: its selector"},
		"env reference": {"services.yaml", "secretKeyRef: {name: %s, key: url}", "secretKeyRef: {name: %s, key: uri}",
			`env NO8S_DATABASE_URL: Secret "no8s-database" has no key "uri"`},
	} {
		t.Run(name, func(t *testing.T) {
			broken := copyChart(t, helm.Chart)
			edit(t, filepath.Join(broken, "templates", c.file), c.old, c.new)
			err := Check(t.Context(), Helm{Bin: helm.Bin, Chart: broken}, api, "no8s-broken-"+strings.ReplaceAll(name, " ", "-"), nil, identity)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("check of the chart with a broken %s: %v\nwant an error containing %q", name, err, c.want)
			}
		})
	}
}

// checkPodFiles: every no8s process mounts its own identity (a service's or
// reconciler's four files), the gateways their bootstrap token, the
// bundled NATS its configuration with the include beside it.
func checkPodFiles(t *testing.T, p *kuberun.Pod) {
	t.Helper()
	files := map[string]kuberun.File{}
	for _, m := range p.Mounts {
		for _, f := range m.Files {
			files[m.Path+"/"+f.Path] = f
		}
	}
	switch {
	case strings.Contains(p.Image, "/no8s:"):
		if p.Job {
			return
		}
		for _, f := range []string{"tls.crt", "tls.key", "ca.crt", "nats.creds"} {
			if _, ok := files["/var/lib/no8s/identity/"+f]; !ok {
				t.Errorf("pod %s: no %s in its identity mount", p.Name, f)
			}
		}
		if strings.HasPrefix(p.Name, "no8s-gateway-") {
			if f, ok := files["/var/lib/no8s/bootstrap/bootstrap.token"]; !ok || f.Mode != 0o440 || len(f.Data) < 32 {
				t.Errorf("pod %s: bootstrap token %+v", p.Name, f)
			}
		}
	case strings.HasPrefix(p.Image, "nats:"):
		for _, f := range []string{"nats-server.conf", "no8s-auth.conf"} {
			if _, ok := files["/etc/nats/"+f]; !ok {
				t.Errorf("pod %s: no /etc/nats/%s", p.Name, f)
			}
		}
	}
}

// TestNotesTellHowToReachTheAPI: the notes `helm install` prints name the
// URL the gateways serve: a port-forward to localhost over HTTP by
// default, the allowed host over HTTPS for the production file.
func TestNotesTellHowToReachTheAPI(t *testing.T) {
	for name, c := range map[string]struct {
		values []string
		want   string
	}{
		"default":    {[]string{identity}, "NO8S_SERVER=http://localhost:8000 "},
		"production": {[]string{identity, filepath.Join(helm.Chart, "ci", "production.yaml")}, "NO8S_SERVER=https://no8s.example.com "},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := helm.run(t.Context(), append([]string{"install", "no8s", helm.Chart, "--dry-run=client"}, valueArgs(c.values)...)...)
			if err != nil {
				t.Fatal(err)
			}
			_, notes, ok := strings.Cut(string(out), "\nNOTES:\n")
			if !ok || !strings.Contains(notes, c.want) {
				t.Fatalf("notes %q\nwant them to hold %q", notes, c.want)
			}
		})
	}
}

// TestChecksumOfDigitsIsAString: a pod template's checksum annotation
// whose 16 hexadecimal digits happen to be decimal ones (about one
// rendering in 1,850) is still a string to the API server. Unquoted, YAML
// read it as a number and the server refused the Deployment. The NATS
// authorization here is chosen (a comment appended) so that its checksum is
// all digits; every checksum annotation of the chart is checked to quote
// its value the same way.
func TestChecksumOfDigitsIsAString(t *testing.T) {
	natsAuth, err := NATSAuth(identity)
	if err != nil {
		t.Fatal(err)
	}
	auth := ""
	for n := 0; n < 1_000_000 && auth == ""; n++ {
		a := fmt.Sprintf("%s\n# %d\n", natsAuth, n)
		sum := sha256.Sum256([]byte(a))
		if h := hex.EncodeToString(sum[:])[:16]; strings.Trim(h, "0123456789") == "" {
			auth = a
		}
	}
	if auth == "" {
		t.Fatal("no NATS authorization with a checksum of digits found")
	}
	override, err := yaml.Marshal(map[string]any{"identity": map[string]any{"natsAuth": auth}})
	if err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(t.TempDir(), "digits.yaml")
	if err := os.WriteFile(values, override, 0o600); err != nil {
		t.Fatal(err)
	}
	const ns = "no8s-digits"
	if err := Check(t.Context(), helm, api, ns, nil, identity, values); err != nil {
		t.Fatal(err)
	}

	templates, err := filepath.Glob(filepath.Join(helm.Chart, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range templates {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(body), "\n") {
			if !strings.Contains(line, "checksum/") || !strings.Contains(line, "{{") {
				continue
			}
			found++
			if !strings.HasSuffix(strings.TrimSpace(line), "| quote }}") {
				t.Errorf("%s:%d: a checksum annotation not quoted: %s", filepath.Base(f), i+1, strings.TrimSpace(line))
			}
		}
	}
	if found == 0 {
		t.Error("no checksum annotation found in the chart's templates")
	}
}
