package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/cli/printer"
	"github.com/no8s/no8s/services/internal/manifest"
)

// Results of applying one document.
const (
	resultCreated    = client.ApplyCreated
	resultConfigured = client.ApplyConfigured
	resultUnchanged  = client.ApplyUnchanged
)

// fileFlags are -f and -R.
type fileFlags struct {
	files     []string
	recursive bool
}

func (f *fileFlags) add(cmd *cobra.Command, verb string) {
	cmd.Flags().StringSliceVarP(&f.files, "filename", "f", nil, "a file, a folder (its .yaml, .yml and .json files) or - (standard input) "+verb+"; repeatable")
	cmd.Flags().BoolVarP(&f.recursive, "recursive", "R", false, "with a folder, its subfolders too")
}

// read decodes the documents of -f, filling in the namespace in force for
// resources that name none, and refusing a document whose namespace
// contradicts an explicit -n.
func (a *app) read(f fileFlags) ([]manifest.Document, error) {
	if len(f.files) == 0 {
		return nil, usagef("give the documents with -f FILE, -f FOLDER or -f - (standard input)")
	}
	docs, err := manifest.Read(f.files, a.streams.In, f.recursive)
	if err != nil {
		return nil, err
	}
	ns := a.resolved.Namespace
	for i := range docs {
		r := docs[i].Resource
		if r == nil {
			continue
		}
		switch {
		case r.Namespace == "":
			r.Namespace = ns
		case a.namespaceSet && r.Namespace != ns:
			return nil, fmt.Errorf("%s: the document's namespace %q does not match --namespace %q", docs[i].Source, r.Namespace, ns)
		}
	}
	manifest.SortForApply(docs)
	return docs, nil
}

func (a *app) applyCmd() *cobra.Command {
	var (
		files  fileFlags
		dryRun string
		output string
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE|FOLDER|-",
		Short: "Create or update namespaces, resource types, webhooks and resources from YAML or JSON documents",
		Long: `Makes the control plane hold what the documents say: each namespace, resource
type, admission webhook and resource is created when missing and updated when
different, and left alone when it already is as given (no new generation,
resource_version or event). Namespaces are applied first, then types, then
webhooks, then resources, so one file can hold a namespace and what goes in
it. Resources go through the server's apply operation (POST
/api/v1/resources/apply), so admission (schema, defaults, webhooks) judges
them as any write.

--dry-run=server runs every check on the server and changes nothing.`,
		Example: `  no8s apply -f db.yaml
  no8s apply -f manifests/ -R
  cat db.yaml | no8s apply -f -
  no8s apply -f db.yaml --dry-run=server`,
		Args: func(_ *cobra.Command, args []string) error {
			return exactArgs(0, "no arguments (documents come with -f)")(args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			dry, err := parseDryRun(dryRun)
			if err != nil {
				return err
			}
			if output != "" && output != printer.FormatName && output != printer.FormatJSON && output != printer.FormatYAML {
				return usagef("-o %q: apply prints json, yaml or name", output)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			docs, err := a.read(files)
			if err != nil {
				return err
			}
			var (
				failed []error
				plan   dryPlan
			)
			for _, d := range docs {
				var (
					res = resultCreated
					obj any
					err error
				)
				note := ""
				if why := plan.unchecked(d); dry && why != "" {
					// The server cannot check what depends on an object
					// that exists only in this dry run.
					note = "; not checked by the server: " + why
					obj = resourceDocOf(d.Resource)
				} else {
					res, obj, err = a.applyDoc(cmd.Context(), c, d, dry)
				}
				if err != nil {
					failed = append(failed, fmt.Errorf("%s: %s: %w", d.Source, d.Key(), err))
					continue
				}
				if dry && res == resultCreated {
					plan.created(d)
				}
				switch output {
				case printer.FormatJSON, printer.FormatYAML:
					if err := printer.Document(a.streams.Out, obj, output); err != nil {
						return err
					}
				case printer.FormatName:
					fmt.Fprintln(a.streams.Out, d.Key())
				default:
					tail := ""
					if dry {
						tail = " (server dry run" + note + ")"
					}
					fmt.Fprintf(a.streams.Out, "%s %s%s\n", d.Key(), res, tail)
				}
			}
			return errors.Join(failed...)
		},
	}
	files.add(cmd, "to apply")
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", `"server": the server checks everything and stores nothing; "none": apply`)
	cmd.Flags().StringVarP(&output, "output", "o", "", "json, yaml: print each object as applied; name: print what was applied")
	return cmd
}

func parseDryRun(v string) (bool, error) {
	switch v {
	case "none", "":
		return false, nil
	case "server":
		return true, nil
	case "client":
		return false, usagef("--dry-run=client is not supported: use --dry-run=server (the server checks everything and stores nothing)")
	}
	return false, usagef("--dry-run=%q: use server or none", v)
}

// dryPlan remembers the namespaces and types that a server dry run of the
// documents would create. The server cannot check a resource in, or of,
// one of those (it would answer namespace_not_found or an unknown type):
// apply --dry-run=server and diff show such a resource as written and say
// so.
type dryPlan struct {
	namespaces, types map[string]bool
}

// created records a document whose object a dry run would create.
func (p *dryPlan) created(d manifest.Document) {
	switch {
	case d.Namespace != nil:
		if p.namespaces == nil {
			p.namespaces = map[string]bool{}
		}
		p.namespaces[d.Namespace.Name] = true
	case d.Type != nil:
		if p.types == nil {
			p.types = map[string]bool{}
		}
		p.types[d.Type.Name+"/"+d.Type.Version] = true
	}
}

// unchecked says why the server cannot check a resource document ("" when
// it can).
func (p *dryPlan) unchecked(d manifest.Document) string {
	r := d.Resource
	if r == nil {
		return ""
	}
	var why []string
	if p.namespaces[r.Namespace] {
		why = append(why, "namespace "+r.Namespace)
	}
	if t := r.TypeName + "/" + r.TypeVersion; p.types[t] {
		why = append(why, "resource type "+t)
	}
	if len(why) == 0 {
		return ""
	}
	return strings.Join(why, " and ") + " would be created first"
}

// applyDoc applies one document and returns what happened and the object
// as the server answered it.
func (a *app) applyDoc(ctx context.Context, c *client.Client, d manifest.Document, dry bool) (string, any, error) {
	switch {
	case d.Namespace != nil:
		return applyNamespace(ctx, c, d.Namespace, dry)
	case d.Resource != nil:
		r, res, err := c.Apply(ctx, applyRequest(d.Resource), client.DryRunIf(dry))
		return res, r, err
	case d.Type != nil:
		return applyType(ctx, c, d.Type, dry)
	case d.Webhook != nil:
		return applyWebhook(ctx, c, d.Webhook, dry)
	}
	return "", nil, fmt.Errorf("empty document")
}

func applyRequest(r *manifest.Resource) client.ApplyRequest {
	req := client.ApplyRequest{
		Namespace: r.Namespace, Name: r.Name, ResourceTypeName: r.TypeName, ResourceTypeVersion: r.TypeVersion, Spec: r.Spec,
	}
	if r.Labels != nil {
		req.Labels = &r.Labels
	}
	if r.Annotations != nil {
		req.Annotations = &r.Annotations
	}
	return req
}

// typeBody is the API body of a type document.
func typeBody(t *manifest.ResourceType) map[string]json.RawMessage {
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	body := map[string]json.RawMessage{"name": str(t.Name), "version": str(t.Version), "description": str(t.Description), "schema": t.Schema}
	if t.ReconcilePolicy != nil {
		body["reconcile_policy"] = t.ReconcilePolicy
	}
	return body
}

// typeView is what apply owns of a type: compared by value.
func typeView(t *client.ResourceType) map[string]any {
	if t == nil {
		return nil
	}
	var schema any
	_ = json.Unmarshal(t.Schema, &schema)
	return map[string]any{"kind": manifest.KindResourceType, "metadata": map[string]any{"name": t.Name}, "version": t.Version,
		"description": t.Description, "schema": schema, "reconcile_policy": t.ReconcilePolicy}
}

// applyType creates a type, or updates it when a dry-run update shows a
// difference.
func applyType(ctx context.Context, c *client.Client, t *manifest.ResourceType, dry bool) (string, any, error) {
	cur, err := c.GetType(ctx, t.Name, t.Version)
	if client.IsNotFound(err) {
		out, err := c.CreateType(ctx, typeBody(t), client.DryRunIf(dry))
		return resultCreated, out, err
	}
	if err != nil {
		return "", nil, err
	}
	would, err := c.UpdateType(ctx, cur.ID, typeBody(t), client.DryRunIf(true))
	if err != nil {
		return "", nil, err
	}
	if reflect.DeepEqual(typeView(cur), typeView(would)) {
		return resultUnchanged, cur, nil
	}
	if dry {
		return resultConfigured, would, nil
	}
	out, err := c.UpdateType(ctx, cur.ID, typeBody(t), client.DryRunIf(false))
	return resultConfigured, out, err
}

// webhookView is what apply owns of a webhook registration.
func webhookView(w *client.Webhook) map[string]any {
	if w == nil {
		return nil
	}
	data, _ := json.Marshal(w)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	for _, k := range []string{"id", "resource_version", "created_at", "updated_at", "name"} {
		delete(m, k)
	}
	m["kind"] = manifest.KindAdmissionWebhook
	m["metadata"] = map[string]any{"name": w.Name}
	return m
}

// applyWebhook creates a registration, or updates it when a dry-run
// update shows a difference.
func applyWebhook(ctx context.Context, c *client.Client, w *manifest.Webhook, dry bool) (string, any, error) {
	cur, err := c.GetWebhookByName(ctx, w.Name)
	if err != nil {
		return "", nil, err
	}
	if cur == nil {
		out, err := c.CreateWebhook(ctx, w.Body, client.DryRunIf(dry))
		return resultCreated, out, err
	}
	would, err := c.UpdateWebhook(ctx, cur.ID, w.Body, client.DryRunIf(true))
	if err != nil {
		return "", nil, err
	}
	if reflect.DeepEqual(webhookView(cur), webhookView(would)) {
		return resultUnchanged, cur, nil
	}
	if dry {
		return resultConfigured, would, nil
	}
	out, err := c.UpdateWebhook(ctx, cur.ID, w.Body, client.DryRunIf(false))
	return resultConfigured, out, err
}
