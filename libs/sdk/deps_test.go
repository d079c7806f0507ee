package sdk_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// forbiddenDeps are module paths a reconciler must not download by
// importing the SDK: the platform's own servers, storage and HTTP stack,
// and the GitHub client (the GitHub Actions plugin is a module of its own).
var forbiddenDeps = []string{
	"github.com/google/go-github",
	"github.com/grpc-ecosystem/grpc-gateway",
	"github.com/jackc/pgx",
	"github.com/labstack/echo",
	"github.com/pressly/goose",
	"github.com/santhosh-tekuri/jsonschema",
	"github.com/nats-io/nats-server",
	"modernc.org/sqlite",
	"github.com/no8s/no8s/services",
}

// TestSDKDependencies lists every package the SDK's packages import, as a
// reconciler's build sees them (outside the workspace), and refuses the
// modules above.
func TestSDKDependencies(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./...")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		for _, bad := range forbiddenDeps {
			if p == bad || strings.HasPrefix(p, bad+"/") || strings.HasPrefix(p, bad+"/v") {
				t.Errorf("the SDK depends on %s (module %s)", p, bad)
			}
		}
	}
}
