package proc

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/healthcheck"
	"github.com/no8s/no8s/services/internal/version"
)

// Builtins answers the commands every service binary has before its own
// flags are parsed, and exits when args (os.Args[1:]) name one:
//
//	<binary> --version               print version.String and exit 0
//	<binary> healthcheck [--addr A]  probe the process's own /readyz (package healthcheck)
//
// healthAddr returns the address the binary serves /readyz on, from the
// same environment and default as its flag, so that the check probes the
// address the service listens on; it is called only for healthcheck.
func Builtins(binary string, args []string, healthAddr func() string) {
	if len(args) == 0 {
		return
	}
	switch args[0] {
	case "--version", "-version":
		fmt.Println(version.String(binary))
		os.Exit(0)
	case "healthcheck":
		os.Exit(healthcheck.Main(context.Background(), binary, args[1:], healthAddr(), os.Stderr))
	}
}

// Main runs the daemon binary whose root command is cmd, and exits: the
// builtins first (Builtins; healthcheck probes the address of cmd's flag
// healthFlag, or healthDef when that is empty), then cmd with every flag on the environment rule
// (flagenv.Bind; deprecated names are logged on the process logger). An
// error is printed as "binary: error" and exits 1.
func Main(binary string, cmd *cobra.Command, healthFlag, healthDef string) {
	Builtins(binary, os.Args[1:], func() string { return HealthAddr(cmd, healthFlag, healthDef, os.Getenv) })
	TuneGC()
	flagenv.Bind(cmd, os.Getenv, BaseLogger().With("service", binary))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.SetArgs(os.Args[1:])
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, binary+":", err)
		os.Exit(1)
	}
}

// HealthAddr returns the address cmd's flag healthFlag gives without a
// command line: from the environment by the rule (aliases included), else
// the flag's default, else healthDef.
func HealthAddr(cmd *cobra.Command, healthFlag, healthDef string, getenv func(string) string) string {
	if addr := flagenv.Value(cmd.LocalFlags(), healthFlag, getenv); addr != "" {
		return addr
	}
	return healthDef
}
