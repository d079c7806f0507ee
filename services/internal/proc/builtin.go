package proc

import (
	"context"
	"fmt"
	"os"

	"github.com/no8s/no8s/services/internal/healthcheck"
	"github.com/no8s/no8s/services/internal/version"
)

// Builtins answers the commands every service binary has before its own
// flags are parsed, and exits when args (os.Args[1:]) name one:
//
//	<binary> --version               print version.String and exit 0
//	<binary> healthcheck [--addr A]  probe the process's own /readyz (package healthcheck)
//
// healthEnv and healthDef are the environment variable and default of the
// address the binary serves /readyz on, so that the check probes the same
// address as the service listens on with the same environment.
func Builtins(binary string, args []string, healthEnv, healthDef string) {
	if len(args) == 0 {
		return
	}
	switch args[0] {
	case "--version", "-version":
		fmt.Println(version.String(binary))
		os.Exit(0)
	case "healthcheck":
		os.Exit(healthcheck.Main(context.Background(), binary, args[1:], healthEnv, healthDef, os.Stderr))
	}
}
