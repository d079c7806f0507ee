package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/cli/printer"
)

// authCmd asks the API what the caller is and may do.
func (a *app) authCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Inspect your identity and what your roles allow",
	}
	cmd.AddCommand(a.canICmd(), a.whoAmICmd())
	return cmd
}

func (a *app) canICmd() *cobra.Command {
	var (
		name   string
		output string
	)
	cmd := &cobra.Command{
		Use:   "can-i VERB TYPE",
		Short: "Ask whether your roles allow VERB on TYPE in the namespace (exit 0 yes, 1 no)",
		Long: `Ask the API whether you may do VERB (get, list, watch, create, update, patch,
delete, reconcile, approve, bind, escalate, manage-tokens) on TYPE: a resource
type's name, a global kind (resource-types, admission-webhooks, namespaces,
tokens) or *. The namespace is --namespace's (default default; -A: every
namespace); global kinds have none. Prints yes or no, and exits 0 or 1.`,
		Example: `  no8s auth can-i create DatabaseCluster -n team-a
  no8s auth can-i delete resource-types
  no8s auth can-i get Queue --name orders -n shop`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r := client.AccessReview{Verb: args[0], Type: args[1], Namespace: a.namespace(), Name: name}
			out, err := c.CanI(cmd.Context(), r)
			if err != nil {
				return err
			}
			if output != "" {
				if err := printer.Document(a.streams.Out, out, output); err != nil {
					return err
				}
			} else if out.Allowed {
				fmt.Fprintln(a.streams.Out, "yes")
			} else {
				fmt.Fprintln(a.streams.Out, "no")
			}
			if !out.Allowed {
				return &exitError{code: ExitError}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the object's name (default: any)")
	cmd.Flags().BoolVarP(&a.allNamespaces, "all-namespaces", "A", false, "every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}
