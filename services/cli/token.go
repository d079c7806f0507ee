package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/cli/printer"
)

// tokenCmd manages API tokens: created (shown once), listed, revoked.
func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens",
		Long: `API tokens authenticate requests to the API (Authorization: Bearer <token>).
A token is shown once, when it is created; the server keeps only a hash of it.`,
	}
	cmd.AddCommand(a.tokenCreateCmd(), a.tokenListCmd(), a.tokenRevokeCmd(), a.whoAmICmd())
	return cmd
}

func (a *app) tokenCreateCmd() *cobra.Command {
	var (
		body   client.TokenCreate
		output string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an API token and print it (it is shown only this once)",
		Example: `  no8s token create laptop --expires-in 720h
  no8s token create ci --service-account --expires-in 0`,
		Args: func(_ *cobra.Command, args []string) error { return exactArgs(1, "NAME")(args) },
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != printer.FormatJSON && output != printer.FormatYAML {
				return usagef("-o %q: token create prints json or yaml (or the token alone without -o)", output)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			body.Name = args[0]
			tok, err := c.CreateToken(cmd.Context(), body)
			if err != nil {
				return err
			}
			if output != "" {
				return printer.Document(a.streams.Out, tok, output)
			}
			expires := "never expires"
			if tok.ExpiresAt != nil {
				expires = "expires " + tok.ExpiresAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintln(a.streams.Out, tok.Value)
			a.progress("token %s (%s) for %s, %s: it is shown only now; revoke it with no8s token revoke %s", tok.ID, tok.Name, tok.Owner, expires, tok.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&body.ExpiresIn, "expires-in", "", `lifetime, a duration ("720h"); "0": never expires (default: the server's, 30 days)`)
	f.BoolVar(&body.ServiceAccount, "service-account", false, "a token for automation: it authenticates as serviceaccount:NAME, with no groups unless --group")
	f.StringSliceVar(&body.Groups, "group", nil, "a group of the token (repeatable; only groups you are in; default: yours)")
	f.StringVarP(&output, "output", "o", "", "json or yaml: the whole record, the token included")
	return cmd
}

func (a *app) tokenListCmd() *cobra.Command {
	var (
		all, inactive bool
		output        string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List API tokens: yours, or every one with --all (administrators)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := printer.CheckFormat(output); err != nil {
				return usagef("%s", err)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			items, err := c.ListTokens(cmd.Context(), all, inactive)
			if err != nil {
				return err
			}
			return printer.Tokens(a.streams.Out, items, output, time.Now())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "every token, not only yours (administrators)")
	f.BoolVar(&inactive, "include-inactive", false, "revoked and expired tokens too")
	f.StringVarP(&output, "output", "o", "", "output format: wide, json, yaml or name")
	return cmd
}

func (a *app) tokenRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke API tokens by id (no8s token list shows the ids)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("revoke takes the ids of the tokens to revoke")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			for _, id := range args {
				if _, err := c.RevokeToken(cmd.Context(), id); err != nil {
					return fmt.Errorf("revoke %s: %w", id, err)
				}
				fmt.Fprintf(a.streams.Out, "token %s revoked\n", id)
			}
			return nil
		},
	}
}

func (a *app) whoAmICmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Print who the API takes your credentials to be",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			who, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			if output != "" {
				return printer.Document(a.streams.Out, who, output)
			}
			fmt.Fprintf(a.streams.Out, "%s (%s)", who.Username, who.Method)
			if len(who.Groups) > 0 {
				fmt.Fprintf(a.streams.Out, " groups %v", who.Groups)
			}
			fmt.Fprintln(a.streams.Out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}
