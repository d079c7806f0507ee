package cli

import (
	"context"
	"fmt"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/services/cli/config"
)

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show and change the configuration file's contexts",
		Long: `The configuration file ($NO8S_CONFIG, else ~/.config/no8s/config.yaml, or
--config) holds named contexts, each a server URL, a namespace and a token
(no8s login adds the OIDC settings that refresh its token):

  current-context: local
  contexts:
    - name: local
      server: http://127.0.0.1:8000
      namespace: default
    - name: prod
      server: https://no8s.example.com
      namespace: payments
      token: ...

Every setting can be overridden: --server, --namespace, --token (and --context
to pick another context), else $NO8S_SERVER, $NO8S_NAMESPACE, $NO8S_TOKEN (and
$NO8S_CONTEXT), else the context's value, else http://127.0.0.1:8000 and
default.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown config command %q: use view, get-contexts, current-context, use-context or set-context", args[0])
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			return usagef("config needs a subcommand: view, get-contexts, current-context, use-context or set-context")
		},
	}
	view := &cobra.Command{
		Use:   "view",
		Short: "Print the configuration file and the settings in force (tokens hidden)",
		Args:  func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			f, err := config.Load(a.path())
			if err != nil {
				return err
			}
			r, err := a.resolve()
			if err != nil {
				return err
			}
			for i := range f.Contexts {
				redact(&f.Contexts[i])
			}
			out, err := yaml.Marshal(f)
			if err != nil {
				return fmt.Errorf("encode configuration: %w", err)
			}
			fmt.Fprintf(a.streams.Out, "# %s\n%s", a.path(), out)
			token := "none"
			if r.Token != "" {
				token = "set"
			}
			fmt.Fprintf(a.streams.Out, "# in force: context %q, server %s, namespace %s, token %s\n", r.Context, r.Server, r.Namespace, token)
			return nil
		},
	}
	getContexts := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts",
		Args:  func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			f, err := config.Load(a.path())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.streams.Out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tNAMESPACE")
			for _, c := range f.Contexts {
				cur := ""
				if c.Name == f.CurrentContext {
					cur = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cur, c.Name, c.Server, c.Namespace)
			}
			return tw.Flush()
		},
	}
	current := &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context's name",
		Args:  func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(*cobra.Command, []string) error {
			f, err := config.Load(a.path())
			if err != nil {
				return err
			}
			if f.CurrentContext == "" {
				return fmt.Errorf("no current context is set (no8s config use-context NAME)")
			}
			fmt.Fprintln(a.streams.Out, f.CurrentContext)
			return nil
		},
	}
	use := &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make a context the current one",
		Args:  func(_ *cobra.Command, args []string) error { return exactArgs(1, "a context NAME")(args) },
		RunE: func(_ *cobra.Command, args []string) error {
			f, err := config.Load(a.path())
			if err != nil {
				return err
			}
			if f.Context(args[0]) == nil {
				return fmt.Errorf("context %q is not in %s (no8s config set-context %s --server URL adds it)", args[0], a.path(), args[0])
			}
			f.CurrentContext = args[0]
			if err := f.Save(a.path()); err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "Switched to context %q.\n", args[0])
			return nil
		},
	}
	setCtx := &cobra.Command{
		Use:     "set-context NAME [--server URL] [--namespace NS] [--token TOKEN] [--ca-file FILE]",
		Short:   "Add a context or change the given settings of one",
		Example: `  no8s config set-context local --server http://127.0.0.1:8000 --namespace default`,
		Args:    func(_ *cobra.Command, args []string) error { return exactArgs(1, "a context NAME")(args) },
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := config.Load(a.path())
			if err != nil {
				return err
			}
			c := config.Context{Name: args[0]}
			if cur := f.Context(args[0]); cur != nil {
				c = *cur
			}
			// The global --server, --namespace, --token and --ca-file flags
			// carry the values.
			if cmd.Flags().Changed("server") {
				c.Server = a.flags.Server
			}
			if cmd.Flags().Changed("namespace") {
				c.Namespace = a.flags.Namespace
			}
			if cmd.Flags().Changed("token") {
				// A token of one's own replaces no8s login's: nothing to refresh.
				c.Token, c.OIDC = a.flags.Token, nil
			}
			if cmd.Flags().Changed("ca-file") {
				c.CAFile = a.flags.CAFile
			}
			f.Set(c)
			if f.CurrentContext == "" {
				f.CurrentContext = c.Name
			}
			if err := f.Save(a.path()); err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "Context %q set.\n", c.Name)
			return nil
		},
	}
	cmd.AddCommand(view, getContexts, current, use, setCtx)
	return cmd
}

// redact hides a context's secrets: its token, and no8s login's refresh
// token and client secret.
func redact(c *config.Context) {
	const hidden = "REDACTED"
	if c.Token != "" {
		c.Token = hidden
	}
	if c.OIDC == nil {
		return
	}
	if c.OIDC.RefreshToken != "" {
		c.OIDC.RefreshToken = hidden
	}
	if c.OIDC.ClientSecret != "" {
		c.OIDC.ClientSecret = hidden
	}
}

func (a *app) versionCmd() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and whether the server answers",
		Args:  func(_ *cobra.Command, args []string) error { return exactArgs(0, "no arguments")(args) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.streams.Out, "Client Version: no8s %s (%s, %s/%s)\n", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if clientOnly {
				return nil
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			v, err := c.Ping(ctx)
			if err != nil {
				return fmt.Errorf("server %s: %w", c.Server(), err)
			}
			fmt.Fprintf(a.streams.Out, "Server: %s (API %s)\n", c.Server(), v)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "the client's version only (no server call)")
	return cmd
}
