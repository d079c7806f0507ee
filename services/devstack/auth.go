package devstack

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/no8s/no8s/services/cli/config"
)

// The development stack's users: authentication is on by default, with an
// administrator's token created at first start in the data directory and
// written into a CLI context; --auth=none runs the API open and says so at
// every start.

// EnvAuth is the environment variable of no8s dev's --auth.
const EnvAuth = "NO8S_AUTH"

// DevContext is the CLI context no8s dev writes.
const DevContext = "no8s-dev"

// TokenFile is the administrator's token in the data directory.
func (c Config) TokenFile() string { return filepath.Join(c.DataDir, "admin.token") }

// writeCLIContext puts the stack's API URL and token in the CLI's context
// DevContext and makes it current, so that `no8s` commands work at once.
// path "" is the CLI's default configuration file; "off" writes none.
func writeCLIContext(path, apiURL, token, caFile string) (string, error) {
	if path == "off" {
		return "", nil
	}
	if path == "" {
		path = config.DefaultPath(os.Getenv)
	}
	f, err := config.Load(path)
	if err != nil {
		return "", err
	}
	ctx := config.Context{Name: DevContext, Server: apiURL, Token: token, CAFile: caFile}
	if cur := f.Context(DevContext); cur != nil {
		ctx.Namespace = cur.Namespace
	}
	f.Set(ctx)
	f.CurrentContext = DevContext
	if err := f.Save(path); err != nil {
		return "", err
	}
	return path, nil
}

// announceAuth writes the CLI context and says how to send the token.
func (s *stack) announceAuth(ready Ready) error {
	if s.token == "" {
		s.log.Warn("AUTHENTICATION IS OFF (--auth=none): the API takes any request, with or without a token")
		return nil
	}
	path, err := writeCLIContext(s.cfg.CLIConfig, ready.APIURL, s.token, ready.CAFile)
	if err != nil {
		return fmt.Errorf("write the CLI context: %w", err)
	}
	if path != "" {
		s.log.Info("the CLI uses this stack: context "+DevContext+" is current", "config", path)
	}
	curl := "curl"
	if ready.CAFile != "" {
		curl += " --cacert " + ready.CAFile
	}
	s.log.Info("every API request needs the administrator's token: export NO8S_TOKEN=$(cat "+ready.TokenFile+
		") and "+curl+" -H \"Authorization: Bearer $NO8S_TOKEN\" "+ready.APIURL+"/api/v1/resource-types", "token_file", ready.TokenFile)
	return nil
}
