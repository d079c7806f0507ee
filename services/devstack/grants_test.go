package devstack

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/grants"
)

// TestGrantsTemplate: with no --credential-grants, no8s dev creates its
// data directory's grants file at first start, granting nothing, says
// where it is, and keeps the file (an edit) at the next start; the
// commented example, uncommented, is a valid file.
func TestGrantsTemplate(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := Config{DataDir: t.TempDir()}
	g, err := loadGrants(cfg, log)
	path := filepath.Join(cfg.DataDir, grants.DevFile)
	if err != nil || g.Len() != 0 || !strings.Contains(logs.String(), path) {
		t.Fatalf("first start: %v, %d grants, log %s", err, g.Len(), logs.String())
	}
	if err := g.Allow(grants.UseDatasource, "default", secret.Env("NO8S_REGISTRY_CRM_PASSWORD"), "127.0.0.1:3306"); err == nil {
		t.Fatal("the new file grants something")
	}
	start, end := strings.Index(grantsTemplate, `# {"grants"`), strings.Index(grantsTemplate, "# ]}")
	if start < 0 || end < start {
		t.Fatal("no example")
	}
	uncommented := regexp.MustCompile(`(?m)^# ?`).ReplaceAllString(grantsTemplate[start:end+len("# ]}")], "")
	ex, err := grants.Parse([]byte(uncommented))
	if err != nil || ex.Len() != 2 || ex.Allow(grants.UseDatasource, "default", secret.Env("NO8S_REGISTRY_CRM_PASSWORD"), "127.0.0.1:3306") != nil {
		t.Fatalf("the example %q: %v", uncommented, err)
	}
	edited := `{"grants": [{"secret": {"env": "NO8S_REGISTRY_X"}, "use": "datasource", "namespaces": ["*"], "destinations": ["db:5432"]}]}`
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if g, err := loadGrants(cfg, log); err != nil || g.Len() != 1 {
		t.Fatalf("after an edit: %v", err)
	}
	cfg.CredentialGrants = filepath.Join(t.TempDir(), "elsewhere.json")
	if _, err := loadGrants(cfg, log); err == nil {
		t.Fatal("a missing --credential-grants file was accepted")
	}
}
