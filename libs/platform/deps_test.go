package platform_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// forbiddenDeps are module paths the platform's packages must not import:
// the services and the SDK that build on them, and the services' heavy
// dependencies (storage, HTTP framework, embedded servers), which the SDK
// would then pull into every reconciler's build.
var forbiddenDeps = []string{
	"github.com/no8s/no8s/services",
	"github.com/no8s/no8s/libs/sdk",
	"github.com/google/go-github",
	"github.com/grpc-ecosystem/grpc-gateway",
	"github.com/jackc/pgx",
	"github.com/labstack/echo",
	"github.com/pressly/goose",
	"github.com/santhosh-tekuri/jsonschema",
	"github.com/nats-io/nats-server",
	"modernc.org/sqlite",
}

// TestPlatformDependencies lists every package the module's packages import
// outside the workspace (as the SDK's build sees them) and refuses the
// modules above.
func TestPlatformDependencies(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./...")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
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
			if p == bad || strings.HasPrefix(p, bad+"/") {
				t.Errorf("the platform module depends on %s (module %s)", p, bad)
			}
		}
	}
}
