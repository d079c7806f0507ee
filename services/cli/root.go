// Package cli is the no8s command line client: kubectl-shaped commands
// (apply, diff, get, describe, delete, reconcile, history, outputs, wait,
// config, login, token, version, completion) over the REST API. The work
// is done in manifest (the document format), client (the API), printer
// (output) and config (contexts); this package parses the command line and
// maps outcomes onto exit codes: 0 success, 1 an error (diff: differences
// found), 2 a usage error (diff: any error).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/cli/config"
	"github.com/no8s/no8s/services/internal/version"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef is a usage error.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitError ends the command with a code and, when msg is not empty, a
// message (diff's "differences found" is code 1 without one).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Streams are the process's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// app is what every command shares: streams, the resolved configuration
// and the clock.
type app struct {
	streams Streams
	getenv  func(string) string
	now     func() time.Time

	// Global flags.
	configPath    string
	flags         config.Overrides
	allNamespaces bool
	timeout       time.Duration

	// namespaceSet is true when -n was given (to tell -n default from no -n).
	namespaceSet bool
	resolved     config.Resolved
}

// Version is the client's version: the one `make build` stamped (package
// internal/version), else the module version the binary was built from, or
// "(devel)", followed by the commit when known.
func Version() string {
	if c := version.Commit(); c != "unknown" && len(c) >= 12 {
		return version.Version() + " " + c[:12]
	}
	return version.Version()
}

// Main runs the CLI with args (without the program name) and returns the
// exit code. extra commands (no8s dev) are added to the root.
func Main(args []string, streams Streams, getenv func(string) string, extra ...*cobra.Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{streams: streams, getenv: getenv, now: time.Now}
	root := a.root(extra...)
	root.SetArgs(args)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(streams.Err, "error:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(streams.Err, "error:", err)
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		fmt.Fprintf(streams.Err, "Run '%s --help' for usage.\n", commandPath(root, args))
		return ExitUsage
	}
	return ExitError
}

// isCobraUsage recognizes cobra's own command-line errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "required flag"} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return true
		}
	}
	return false
}

func commandPath(root *cobra.Command, args []string) string {
	if c, _, err := root.Find(args); err == nil && c != nil {
		return c.CommandPath()
	}
	return root.Name()
}

func (a *app) root(extra ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "no8s",
		Short: "no8s: a Kubernetes-style control plane for infrastructure",
		Long: `no8s is the client of a no8s control plane (and, with "no8s dev", the whole
control plane in one process).

Configuration: --server, --namespace and --token, else $NO8S_SERVER,
$NO8S_NAMESPACE and $NO8S_TOKEN, else the current context of the configuration
file ($NO8S_CONFIG, default ~/.config/no8s/config.yaml; "no8s config --help"),
else http://127.0.0.1:8000 and the namespace default.

Exit codes: 0 success; 1 an error (for diff: differences found); 2 a usage
error (for diff: any error).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version(),
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.configPath, "config", "", "the configuration file ($NO8S_CONFIG, default ~/.config/no8s/config.yaml)")
	pf.StringVar(&a.flags.Context, "context", "", "the configuration context to use ($NO8S_CONTEXT)")
	pf.StringVarP(&a.flags.Server, "server", "s", "", "the API server's URL ($NO8S_SERVER, default http://127.0.0.1:8000)")
	pf.StringVarP(&a.flags.Namespace, "namespace", "n", "", "the namespace ($NO8S_NAMESPACE, default default)")
	pf.StringVar(&a.flags.Token, "token", "", "a bearer token to send ($NO8S_TOKEN)")
	pf.StringVar(&a.flags.CAFile, "ca-file", "", "PEM file of the CA certificates trusted, alone, for an https server ($NO8S_CA_FILE; no8s dev --tls: <data-dir>/tls/ca.crt)")
	_ = root.RegisterFlagCompletionFunc("namespace", a.completeNamespaces)
	pf.DurationVar(&a.timeout, "request-timeout", 30*time.Second, "how long one API request may take")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		a.namespaceSet = cmd.Flags().Changed("namespace")
		return nil
	}
	root.AddCommand(a.applyCmd(), a.diffCmd(), a.getCmd(), a.describeCmd(), a.deleteCmd(), a.reconcileCmd(),
		a.historyCmd(), a.outputsCmd(), a.waitCmd(), a.configCmd(), a.identityCmd(), a.loginCmd(), a.tokenCmd(), a.authCmd(), a.versionCmd())
	for _, c := range extra {
		root.AddCommand(c)
	}
	return root
}

// path is the configuration file in force.
func (a *app) path() string {
	if a.configPath != "" {
		return a.configPath
	}
	return config.DefaultPath(a.getenv)
}

// resolve reads the configuration and lays flags and environment over it.
func (a *app) resolve() (config.Resolved, error) {
	f, err := config.Load(a.path())
	if err != nil {
		return config.Resolved{}, err
	}
	r, err := f.Resolve(a.flags, a.env())
	if err != nil {
		return r, err
	}
	if fe := names.Namespace("", r.Namespace); fe != nil {
		return r, usagef("namespace: %s", fe.Message)
	}
	a.resolved = r
	return r, nil
}

// env is what the environment variables say.
func (a *app) env() config.Overrides {
	return config.Overrides{
		Context: a.getenv(config.EnvContext), Server: a.getenv(config.EnvServer),
		Namespace: a.getenv(config.EnvNamespace), Token: a.getenv(config.EnvToken),
		CAFile: a.getenv(config.EnvCAFile),
	}
}

// client builds the API client from the configuration in force. A
// context's ID token from no8s login is refreshed first when it has
// expired or is about to (refreshIfDue).
func (a *app) client(ctx context.Context) (*client.Client, error) {
	r, err := a.resolve()
	if err != nil {
		return nil, err
	}
	if r.Token, err = a.refreshIfDue(ctx, r); err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithToken(r.Token), client.WithTimeout(a.timeout), client.WithUserAgent("no8s-cli")}
	if r.CAFile != "" {
		opts = append(opts, client.WithCAFile(r.CAFile))
	}
	return client.New(r.Server, opts...)
}

// namespace is the namespace in force ("" with -A, where allowed).
func (a *app) namespace() string {
	if a.allNamespaces {
		return ""
	}
	return a.resolved.Namespace
}

// progress writes a note on stderr (long waits, reconnects).
func (a *app) progress(format string, args ...any) {
	fmt.Fprintf(a.streams.Err, format+"\n", args...)
}
