package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/libs/platform/identity"
)

func TestIdentityCommands(t *testing.T) {
	dir := t.TempDir()
	ca, noop := filepath.Join(dir, "ca"), filepath.Join(dir, "noop")

	code, out, errOut := run(t, nil, "", "identity", "init-ca", "--ca-dir", ca)
	if code != ExitOK || !strings.HasPrefix(out, "CA created: "+ca) {
		t.Fatalf("init-ca: %d %q %q", code, out, errOut)
	}
	keyBefore, err := os.ReadFile(filepath.Join(ca, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, nil, "", "identity", "init-ca", "--ca-dir", ca, "--nats"); code != ExitOK || !strings.HasPrefix(out, "CA exists: ") || !strings.Contains(out, "NATS keys added") {
		t.Fatalf("init-ca --nats on the existing CA: %d %q", code, out)
	}
	if code, out, _ := run(t, nil, "", "identity", "init-ca", "--ca-dir", ca, "--nats"); code != ExitOK || strings.Contains(out, "NATS keys added") {
		t.Fatalf("init-ca --nats again: %d %q", code, out)
	}
	if keyAfter, _ := os.ReadFile(filepath.Join(ca, "ca.key")); string(keyAfter) != string(keyBefore) {
		t.Fatal("init-ca replaced an existing CA key")
	}

	code, out, errOut = run(t, nil, "", "identity", "issue", "--ca-dir", ca, "--out", noop, "--reconciler", "noop", "--types", "Noop/v1,Db/v1beta1")
	if code != ExitOK || !strings.HasPrefix(out, "issued reconciler/noop (types ") {
		t.Fatalf("issue: %d %q %q", code, out, errOut)
	}
	creds, err := identity.Load(noop)
	if err != nil {
		t.Fatal(err)
	}
	if id := creds.ID(); !id.Is(identity.Reconciler, "noop") || !id.Serves("Noop/v1") || !id.Serves("Db/v1beta1") {
		t.Fatalf("issued %+v", id)
	}
	if fi, err := os.Stat(filepath.Join(noop, identity.KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
	if code, out, _ := run(t, nil, "", "identity", "show", noop); code != ExitOK || !strings.HasPrefix(out, "reconciler/noop (types ") || !strings.Contains(out, "valid until ") {
		t.Fatalf("show: %d %q", code, out)
	}
	if fi, err := os.Stat(filepath.Join(noop, identity.NATSCredsFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the NATS user beside the certificate: %v %v", fi, err)
	}

	// NATS clients get a NATS user alone; the server configuration trusts it.
	orders := filepath.Join(dir, "orders")
	if code, out, errOut := run(t, nil, "", "identity", "issue", "--ca-dir", ca, "--out", orders, "--nats-publisher", "orders"); code != ExitOK || !strings.Contains(out, "nats --creds "+filepath.Join(orders, identity.NATSCredsFile)) {
		t.Fatalf("issue --nats-publisher: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(orders, identity.CertFile)); !os.IsNotExist(err) {
		t.Fatalf("a NATS publisher got a certificate: %v", err)
	}
	if code, out, errOut := run(t, nil, "", "identity", "nats-config", "--ca-dir", ca); code != ExitOK || !strings.Contains(out, "resolver: MEMORY") || !strings.Contains(out, "operator: ") {
		t.Fatalf("nats-config: %d %q %q", code, out, errOut)
	}

	// Usage errors write nothing.
	for _, args := range [][]string{
		{"--service", "evil"},
		{"--service", "store", "--client", "ci"},
		{},
		{"--client", "ci", "--types", "Noop/v1"},
		{"--reconciler", "noop", "--types", "noop"},
		{"--reconciler", "Bad_Name"},
		{"--nats-reader", "audit", "--host", "localhost"},
		{"--nats-publisher", "orders", "--nats-reader", "audit"},
		{"--nats-publisher", "orders", "--types", "Noop/v1"},
	} {
		out := filepath.Join(dir, "refused")
		code, _, errOut := run(t, nil, "", append([]string{"identity", "issue", "--ca-dir", ca, "--out", out}, args...)...)
		if code != ExitUsage || !strings.Contains(errOut, "error: ") {
			t.Errorf("issue %v: exit %d, %q; want a usage error", args, code, errOut)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("issue %v wrote %s", args, out)
		}
	}
	if code, _, errOut := run(t, nil, "", "identity", "issue", "--ca-dir", filepath.Join(dir, "none"), "--out", filepath.Join(dir, "x"), "--service", "store"); code != ExitError || !strings.Contains(errOut, "no such file") {
		t.Errorf("issue from a missing CA: %d %q", code, errOut)
	}

	// Rotation: both CAs in the bundle, then only the new one.
	if code, out, _ := run(t, nil, "", "identity", "rotate-ca", "--ca-dir", ca); code != ExitOK || !strings.Contains(out, "still trusted") {
		t.Fatalf("rotate-ca: %d %q", code, out)
	}
	if n := strings.Count(readFile(t, filepath.Join(ca, "ca.crt")), "BEGIN CERTIFICATE"); n != 2 {
		t.Fatalf("bundle after rotate-ca holds %d certificates", n)
	}
	if code, _, _ := run(t, nil, "", "identity", "retire-ca", "--ca-dir", ca); code != ExitOK {
		t.Fatalf("retire-ca: %d", code)
	}
	if n := strings.Count(readFile(t, filepath.Join(ca, "ca.crt")), "BEGIN CERTIFICATE"); n != 1 {
		t.Fatalf("bundle after retire-ca holds %d certificates", n)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestIdentityTypeClaims: the CA issues a type to one reconciler at a
// time; the holder renews freely; release-type frees it.
func TestIdentityTypeClaims(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if code, _, errOut := run(t, nil, "", "identity", "init-ca", "--ca-dir", ca); code != ExitOK {
		t.Fatalf("init-ca: %d %q", code, errOut)
	}
	issue := func(name, types, out string) (int, string) {
		t.Helper()
		code, _, errOut := run(t, nil, "", "identity", "issue", "--ca-dir", ca, "--out", filepath.Join(dir, out), "--reconciler", name, "--types", types)
		return code, errOut
	}
	if code, errOut := issue("a", "A/v1,Shared/v1", "a"); code != ExitOK {
		t.Fatalf("issue a: %d %q", code, errOut)
	}
	if code, errOut := issue("a", "A/v1,Shared/v1", "a"); code != ExitOK {
		t.Fatalf("a renewing its own types: %d %q", code, errOut)
	}
	code, errOut := issue("b", "B/v1,Shared/v1", "b")
	if code != ExitError || !strings.Contains(errOut, "Shared/v1 by reconciler/a") || !strings.Contains(errOut, "release-type") {
		t.Fatalf("b claiming a's type: %d %q; want a refusal naming reconciler/a", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Fatal("the refused issue wrote credentials")
	}
	if code, errOut := issue("b", "B/v1", "b"); code != ExitOK {
		t.Fatalf("b on its own type: %d %q", code, errOut)
	}
	code, out, errOut := run(t, nil, "", "identity", "release-type", "--ca-dir", ca, "Shared/v1", "None/v1")
	if code != ExitOK || !strings.Contains(out, "released Shared/v1 (was reconciler/a's") || !strings.Contains(out, "None/v1: not claimed") {
		t.Fatalf("release-type: %d %q %q", code, out, errOut)
	}
	if code, errOut := issue("b", "B/v1,Shared/v1", "b"); code != ExitOK {
		t.Fatalf("b after the release: %d %q", code, errOut)
	}
	if code, errOut := issue("a", "A/v1,Shared/v1", "a"); code != ExitError || !strings.Contains(errOut, "Shared/v1 by reconciler/b") {
		t.Fatalf("a claiming the released type back: %d %q", code, errOut)
	}
	if code, _, _ := run(t, nil, "", "identity", "release-type", "--ca-dir", ca); code != ExitUsage {
		t.Fatalf("release-type without a type: %d, want a usage error", code)
	}
}

// TestIdentityEnsure: the first run creates the CA with NATS keys and
// issues every service, the reconcilers named and the NATS users, and
// writes the NATS include; the second run keeps everything; a bad
// --reconciler is a usage error.
func TestIdentityEnsure(t *testing.T) {
	dir := t.TempDir()
	ca, out, conf := filepath.Join(dir, "ca"), filepath.Join(dir, "identity"), filepath.Join(dir, "nats", "no8s-auth.conf")
	args := []string{"identity", "ensure", "--ca-dir", ca, "--out", out, "--reconciler", "tenant=Tenant/v1", "--reconciler", "noop=DatabaseCluster/v1,WebApp/v1",
		"--nats-publisher", "queue-input", "--nats-reader", "events", "--nats-config", conf}
	code, stdout, errOut := run(t, nil, "", args...)
	if code != ExitOK || !strings.HasPrefix(stdout, "CA created in "+ca) || strings.Contains(stdout, "kept ") || !strings.Contains(stdout, "wrote "+conf) {
		t.Fatalf("first ensure: %d %q %q", code, stdout, errOut)
	}
	for _, d := range []string{"service-store", "service-admission", "service-gateway", "service-scheduler", "service-registry-sync", "reconciler-tenant", "reconciler-noop"} {
		if _, err := identity.Load(filepath.Join(out, d)); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	for _, d := range []string{"publisher-queue-input", "reader-events"} {
		if _, err := os.Stat(filepath.Join(out, d, identity.NATSCredsFile)); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	code, stdout, errOut = run(t, nil, "", args...)
	if code != ExitOK || strings.Contains(stdout, "issued ") || !strings.Contains(stdout, "kept reconciler/noop (types DatabaseCluster/v1, WebApp/v1)") || !strings.Contains(stdout, "kept "+conf) {
		t.Fatalf("second ensure: %d %q %q", code, stdout, errOut)
	}
	if code, _, errOut := run(t, nil, "", "identity", "ensure", "--ca-dir", ca, "--out", out, "--reconciler", "tenant"); code != ExitUsage || !strings.Contains(errOut, "NAME=Type/v1") {
		t.Fatalf("--reconciler without types: %d %q", code, errOut)
	}
}

// TestIdentityEnsureHelmValues: --helm-values writes the chart's identity
// values, mode 0600: every credentials directory's files by its name, the
// NATS include ensure keeps and the bootstrap token.
func TestIdentityEnsureHelmValues(t *testing.T) {
	dir := t.TempDir()
	out, conf, tok, values := filepath.Join(dir, "identity"), filepath.Join(dir, "no8s-auth.conf"), filepath.Join(dir, "bootstrap.token"), filepath.Join(dir, "identity.yaml")
	code, stdout, errOut := run(t, nil, "", "identity", "ensure", "--ca-dir", filepath.Join(dir, "ca"), "--out", out, "--reconciler", "noop=DatabaseCluster/v1",
		"--nats-reader", "events", "--nats-config", conf, "--bootstrap-token", tok, "--helm-values", values)
	if code != ExitOK || !strings.Contains(stdout, "wrote "+values) {
		t.Fatalf("ensure --helm-values: %d %q %q", code, stdout, errOut)
	}
	fi, err := os.Stat(values)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v; want mode 0600", values, fi, err)
	}
	body, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Identity helmIdentity `yaml:"identity"`
	}
	if err := yaml.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range got.Identity.Credentials {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"reader-events", "reconciler-noop", "service-admission", "service-gateway", "service-registry-sync", "service-scheduler", "service-store"}
	if !slices.Equal(names, want) {
		t.Errorf("credentials %v, want %v", names, want)
	}
	for file, text := range got.Identity.Credentials["service-store"] {
		onDisk, err := os.ReadFile(filepath.Join(out, "service-store", file))
		if err != nil || string(onDisk) != text {
			t.Errorf("service-store %s: differs from the file on disk (%v)", file, err)
		}
	}
	if len(got.Identity.Credentials["service-store"]) != 4 || len(got.Identity.Credentials["reader-events"]) != 1 {
		t.Errorf("files: service-store %d (want tls.crt, tls.key, ca.crt, nats.creds), reader-events %d (want nats.creds)",
			len(got.Identity.Credentials["service-store"]), len(got.Identity.Credentials["reader-events"]))
	}
	if include, _ := os.ReadFile(conf); got.Identity.NATSAuth != string(include) || len(include) == 0 {
		t.Errorf("natsAuth is not the include ensure wrote")
	}
	if token, _ := os.ReadFile(tok); got.Identity.BootstrapToken != strings.TrimSpace(string(token)) || got.Identity.BootstrapToken == "" {
		t.Errorf("bootstrapToken %q is not the file's", got.Identity.BootstrapToken)
	}
}
