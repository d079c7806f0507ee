package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

// helmIdentity is the identity part of the Helm chart's values
// (deploy/helm/no8s): every credentials directory by its name, the
// nats-server include and the gateways' bootstrap token.
type helmIdentity struct {
	Credentials    map[string]map[string]string `yaml:"credentials"`
	NATSAuth       string                       `yaml:"natsAuth"`
	BootstrapToken string                       `yaml:"bootstrapToken,omitempty"`
}

// writeHelmValues writes the chart's identity values for ids, read from
// their credentials directories under root as Ensure laid them out, to
// path (mode 0600: it holds private keys). natsAuth is the nats-server
// include; tokenFile, when not empty, the bootstrap token's file.
func writeHelmValues(path, root string, ids []identity.ID, natsAuth []byte, tokenFile string) error {
	v := helmIdentity{Credentials: map[string]map[string]string{}, NATSAuth: string(natsAuth)}
	for _, id := range ids {
		dir := identityca.CredentialsDir(root, id)
		files, err := readCredentialFiles(dir)
		if err != nil {
			return fmt.Errorf("helm values: %w", err)
		}
		v.Credentials[filepath.Base(dir)] = files
	}
	if tokenFile != "" {
		tok, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("helm values: bootstrap token: %w", err)
		}
		v.BootstrapToken = strings.TrimSpace(string(tok))
	}
	body, err := yaml.Marshal(map[string]any{"identity": v})
	if err != nil {
		return fmt.Errorf("helm values: %w", err)
	}
	head := "# The no8s chart's identity values (deploy/helm/no8s), written by `no8s identity ensure --helm-values`:\n" +
		"# private keys and the bootstrap token. Keep this file as secret as the CA; pass it with `helm install -f`.\n"
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(head), body...), 0o600); err != nil {
		return fmt.Errorf("helm values: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("helm values: %w", err)
	}
	return nil
}

// readCredentialFiles reads every regular file of a credentials directory
// (tls.crt, tls.key, ca.crt, nats.creds) by its name.
func readCredentialFiles(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		files[n] = string(b)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no credentials", dir)
	}
	return files, nil
}

// natsInclude is the nats-server include of ca: the file ensure keeps
// (path), or, without one, as nats-config writes it.
func natsInclude(ca *identityca.CA, path string, now time.Time) ([]byte, error) {
	if path != "" {
		return os.ReadFile(path)
	}
	srv, err := ca.NATSServer(now)
	if err != nil {
		return nil, err
	}
	return srv.Config(), nil
}
