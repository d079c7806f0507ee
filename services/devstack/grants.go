package devstack

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/proc"
)

// grantsTemplate is the data directory's grants file (grants.DevFile) at
// first start: nothing granted, and a commented example (the lines after
// "Example", uncommented, are a valid file: TestGrantsTemplate).
const grantsTemplate = `# Credential grants of no8s dev: which namespaces' TenantRegistries and
# HttpSources may use which secret references, for what, sent where.
# Nothing is granted until a grant is listed here: every secret reference
# is refused. Restart no8s dev after an edit. Lines starting with # are
# comments. See ` + grants.DocsRef + `.
#
# Example: namespace "default" may use the environment variable
# NO8S_REGISTRY_CRM_PASSWORD as a TenantRegistry's passwordRef for a
# datasource at 127.0.0.1:3306, and NO8S_REGISTRY_CMDB_TOKEN as an
# HttpSource's header value sent to http://127.0.0.1:9000:
#
# {"grants": [
#   {"secret": {"env": "NO8S_REGISTRY_CRM_PASSWORD"}, "use": "datasource",
#    "namespaces": ["default"], "destinations": ["127.0.0.1:3306"]},
#   {"secret": {"env": "NO8S_REGISTRY_CMDB_TOKEN"}, "use": "httpHeader",
#    "namespaces": ["default"], "destinations": ["http://127.0.0.1:9000"]}
# ]}

{"grants": []}
`

// loadGrants reads the credential grants of the stack: the file that
// cfg.CredentialGrants names, or else the data directory's
// grants.DevFile, created at first start with nothing granted. It logs
// which file it read.
func loadGrants(cfg Config, log *slog.Logger) (*grants.Set, error) {
	path := cfg.CredentialGrants
	if path == "" {
		path = filepath.Join(cfg.DataDir, grants.DevFile)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case errors.Is(err, fs.ErrExist): // kept from an earlier start
		case err != nil:
			return nil, fmt.Errorf("credential grants: %w", err)
		default:
			_, werr := f.WriteString(grantsTemplate)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return nil, fmt.Errorf("credential grants %s: %w", path, werr)
			}
			log.Info("created the credential grants file: nothing is granted; list a grant there to let a namespace use a secret reference", "file", path)
		}
	}
	return proc.LoadGrants(path, log)
}
