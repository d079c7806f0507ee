// Package helmcheck checks the Helm chart (deploy/helm/no8s) as `make
// deploy-check` does: `helm lint` and `helm template` of a values set, the
// rendered objects' wiring (services/deploycheck/kuberun), then every
// rendered object applied with a server-side dry run to a real
// kube-apiserver (services/internal/kubeapi), in a namespace that enforces
// and warns on the restricted Pod Security Standard. Any refusal and any
// Warning the API server answers fail the check. The drivers are the tests
// behind the build tag deploycheck.
package helmcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/services/cli"
	"github.com/no8s/no8s/services/deploycheck/kuberun"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/kubeapi"
)

// Helm runs the helm binary on the chart.
type Helm struct {
	// Bin is the helm binary (make k8s-tools).
	Bin string
	// Chart is the chart's directory.
	Chart string
}

// run runs helm with args and returns what it printed on its standard
// output, and an error quoting its standard error when it failed.
func (h Helm) run(ctx context.Context, args ...string) ([]byte, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, errOut.String(), out.String())
	}
	return out.Bytes(), nil
}

// valueArgs is -f FILE for each values file.
func valueArgs(values []string) []string {
	var args []string
	for _, v := range values {
		args = append(args, "-f", v)
	}
	return args
}

// Lint runs `helm lint --strict` with the values files.
func (h Helm) Lint(ctx context.Context, values ...string) error {
	_, err := h.run(ctx, append([]string{"lint", "--strict", h.Chart}, valueArgs(values)...)...)
	return err
}

// Template renders the chart as release in namespace ns with the values
// files (hooks included, as `helm install` would create them).
func (h Helm) Template(ctx context.Context, release, ns string, values ...string) ([]byte, error) {
	return h.run(ctx, append([]string{"template", release, h.Chart, "--namespace", ns}, valueArgs(values)...)...)
}

// TemplateUpgrade renders the chart as `helm upgrade` would
// (.Release.IsUpgrade).
func (h Helm) TemplateUpgrade(ctx context.Context, release, ns string, values ...string) ([]byte, error) {
	return h.run(ctx, append([]string{"template", release, h.Chart, "--namespace", ns, "--is-upgrade"}, valueArgs(values)...)...)
}

// RestrictedLabels are the labels of a namespace that enforces, and warns
// on, the restricted Pod Security Standard.
var RestrictedLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
	"pod-security.kubernetes.io/warn":            "restricted",
	"pod-security.kubernetes.io/warn-version":    "latest",
}

// Check lints and renders the chart with the values files, reads the
// rendered objects, after the existing ones the release expects in the
// cluster (a TLS Secret the values name), into the pods and Services they
// make (kuberun: every Secret, ConfigMap and key a pod references exists,
// every Service picks pods and forwards to their ports, every address a
// pod names is a Service's port), creates the namespace ns (restricted) on
// api and applies every existing and rendered object there with a
// server-side dry run. It fails on a lint or render error, on any of those
// and on any object the API server refuses or Warning it answers.
func Check(ctx context.Context, h Helm, api *kubeapi.Server, ns string, existing []byte, values ...string) error {
	if err := h.Lint(ctx, values...); err != nil {
		return err
	}
	manifests, err := h.Template(ctx, "no8s", ns, values...)
	if err != nil {
		return err
	}
	manifests = kuberun.Documents(existing, manifests)
	top, err := kuberun.Read(manifests, ns)
	if err != nil {
		return fmt.Errorf("the chart with %s: %w", strings.Join(values, ", "), err)
	}
	if err := top.Wiring(); err != nil {
		return fmt.Errorf("the chart with %s does not wire up: %w", strings.Join(values, ", "), err)
	}
	if err := api.CreateNamespace(ctx, ns, RestrictedLabels); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	warnings, err := api.ApplyDryRun(ctx, ns, manifests)
	if len(warnings) > 0 {
		err = errors.Join(err, fmt.Errorf("the API server warned:\n  %s", strings.Join(warnings, "\n  ")))
	}
	if err != nil {
		return fmt.Errorf("the chart with %s, applied (server-side dry run) to namespace %s: %w", strings.Join(values, ", "), ns, err)
	}
	return nil
}

// TLSSecret is a kubernetes.io/tls Secret name in namespace ns holding a
// server certificate for hosts, valid for a day, as cert-manager would
// keep it for an Ingress's host, and the PEM certificate of the new CA
// that issued it, which a client trusts.
func TLSSecret(name, ns string, hosts ...string) (manifest, caPEM []byte, err error) {
	now := time.Now()
	ca, err := identityca.New(now, 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	cert, key, err := ca.IssueServer(now, 24*time.Hour, hosts...)
	if err != nil {
		return nil, nil, err
	}
	manifest, err = yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"stringData": map[string]string{"tls.crt": string(cert), "tls.key": string(key)}})
	if err != nil {
		return nil, nil, err
	}
	return manifest, ca.Bundle(), nil
}

// IdentityValues issues a deployment's credentials (a new CA, the
// services, the tenant and noop reconcilers, a NATS publisher and reader,
// the bootstrap token) under dir with `no8s identity ensure --helm-values`,
// as a user would, and returns the values file.
func IdentityValues(dir string) (string, error) {
	values := filepath.Join(dir, "identity.yaml")
	var out bytes.Buffer
	code := cli.Main([]string{"identity", "ensure", "--ca-dir", filepath.Join(dir, "ca"), "--out", filepath.Join(dir, "identity"),
		"--reconciler", "tenant=Tenant/v1", "--reconciler", "noop=DatabaseCluster/v1,WebApp/v1",
		"--nats-publisher", "queue-input", "--nats-reader", "events",
		"--bootstrap-token", filepath.Join(dir, "identity", "bootstrap.token"), "--helm-values", values},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out}, func(string) string { return "" })
	if code != 0 {
		return "", fmt.Errorf("no8s identity ensure: exit %d\n%s", code, out.String())
	}
	return values, nil
}

// NATSAuth is the NATS authorization (identity.natsAuth) in the identity
// values file at path, as IdentityValues writes it.
func NATSAuth(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var v struct {
		Identity struct {
			NATSAuth string `yaml:"natsAuth"`
		} `yaml:"identity"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return v.Identity.NATSAuth, nil
}

// CopyChart copies the chart's directory src to dst (symbolic links as the
// files they name), for copies broken on purpose.
func CopyChart(src, dst string) error {
	return filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// Edit replaces every old in the file at path with new; a file holding no
// old is an error.
func Edit(path, old, new string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(old)) {
		return fmt.Errorf("%s holds no %q", path, old)
	}
	return os.WriteFile(path, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o644)
}
