package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/cli/printer"
	"github.com/no8s/no8s/services/internal/manifest"
)

func (a *app) diffCmd() *cobra.Command {
	var files fileFlags
	cmd := &cobra.Command{
		Use:   "diff -f FILE|FOLDER|-",
		Short: "Show, as a unified diff, what apply would change",
		Long: `Asks the server what applying the documents would store (a server dry run, so
defaults and mutating webhooks are included) and prints a unified diff of the
live objects against that, in the document format (YAML). For resources the
diff covers what apply owns: labels, annotations and spec; for namespaces,
whether they exist. A resource in a namespace (or of a type) that the same
documents create is shown as written: the server cannot check it before its
namespace exists (a note on stderr says so).

Exit code: 0 when apply would change nothing, 1 when it would change something,
2 on any error.`,
		Example: `  no8s diff -f db.yaml
  no8s diff -f manifests/ && echo "nothing to apply"`,
		Args: func(_ *cobra.Command, args []string) error {
			return exactArgs(0, "no arguments (documents come with -f)")(args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := a.diff(cmd.Context(), files)
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				return &exitError{code: ExitUsage, msg: err.Error()}
			}
			return err
		},
	}
	files.add(cmd, "to compare")
	return cmd
}

func (a *app) diff(ctx context.Context, files fileFlags) error {
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	docs, err := a.read(files)
	if err != nil {
		return err
	}
	differs := false
	var plan dryPlan
	for _, d := range docs {
		var live, applied any
		if why := plan.unchecked(d); why != "" {
			a.progress("%s: %s: shown as written, not checked by the server: %s", d.Source, d.Key(), why)
			applied = resourceDocOf(d.Resource)
		} else {
			live, applied, err = a.diffViews(ctx, c, d)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", d.Source, d.Key(), err)
			}
		}
		if isNil(live) && !isNil(applied) {
			plan.created(d)
		}
		before, err := render(live)
		if err != nil {
			return err
		}
		after, err := render(applied)
		if err != nil {
			return err
		}
		if out := unifiedDiff(before, after, "live "+d.Key(), "applied "+d.Key()); out != "" {
			differs = true
			fmt.Fprint(a.streams.Out, out)
		}
	}
	if differs {
		return &exitError{code: ExitError}
	}
	return nil
}

// render is a view as YAML; "" for nil (the object does not exist).
func render(view any) (string, error) {
	if isNil(view) {
		return "", nil
	}
	var b bytes.Buffer
	if err := printer.Document(&b, view, printer.FormatYAML); err != nil {
		return "", err
	}
	return b.String(), nil
}

// isNil reports whether a view stands for no object.
func isNil(v any) bool { return v == nil || isNilMap(v) || isNilDoc(v) }

func isNilDoc(v any) bool {
	d, ok := v.(*resourceDoc)
	return ok && d == nil
}

func isNilMap(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m == nil
}

// diffViews returns what apply owns of the live object (nil when missing)
// and of the object as a server dry run of the apply would store it.
func (a *app) diffViews(ctx context.Context, c *client.Client, d manifest.Document) (any, any, error) {
	switch {
	case d.Namespace != nil:
		return namespaceDiffViews(ctx, c, d.Namespace)
	case d.Resource != nil:
		r := d.Resource
		cur, err := c.GetResource(ctx, r.TypeName, r.TypeVersion, r.Namespace, r.Name)
		if err != nil && !client.IsNotFound(err) {
			return nil, nil, err
		}
		would, _, err := c.Apply(ctx, applyRequest(r), client.DryRunIf(true))
		if err != nil {
			return nil, nil, err
		}
		return resourceView(cur), resourceView(would), nil
	case d.Type != nil:
		cur, err := c.GetType(ctx, d.Type.Name, d.Type.Version)
		if client.IsNotFound(err) {
			would, err := c.CreateType(ctx, typeBody(d.Type), client.DryRunIf(true))
			if err != nil {
				return nil, nil, err
			}
			return nil, typeView(would), nil
		}
		if err != nil {
			return nil, nil, err
		}
		would, err := c.UpdateType(ctx, cur.ID, typeBody(d.Type), client.DryRunIf(true))
		if err != nil {
			return nil, nil, err
		}
		return typeView(cur), typeView(would), nil
	case d.Webhook != nil:
		cur, err := c.GetWebhookByName(ctx, d.Webhook.Name)
		if err != nil {
			return nil, nil, err
		}
		if cur == nil {
			would, err := c.CreateWebhook(ctx, d.Webhook.Body, client.DryRunIf(true))
			if err != nil {
				return nil, nil, err
			}
			return nil, webhookView(would), nil
		}
		would, err := c.UpdateWebhook(ctx, cur.ID, d.Webhook.Body, client.DryRunIf(true))
		if err != nil {
			return nil, nil, err
		}
		return webhookView(cur), webhookView(would), nil
	}
	return nil, nil, fmt.Errorf("empty document")
}

// resourceDoc is a resource in the document format, fields in the
// format's order.
type resourceDoc struct {
	Kind     string     `json:"kind"`
	Type     string     `json:"type"`
	Metadata resourceMD `json:"metadata"`
	Spec     any        `json:"spec"`
}

type resourceMD struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// resourceView is a resource in the document format, with what apply owns:
// labels, annotations and spec; nil when r is nil.
func resourceView(r *client.Resource) any {
	if r == nil {
		return nil
	}
	return resourceDocOf(&manifest.Resource{TypeName: r.ResourceTypeName, TypeVersion: r.ResourceTypeVersion, Namespace: r.Namespace,
		Name: r.Name, Labels: r.Labels, Annotations: r.Annotations, Spec: r.Spec})
}

// resourceDocOf is a resource document as written, in the document format
// (what diff and a dry run show when the server cannot check it).
func resourceDocOf(r *manifest.Resource) *resourceDoc {
	var spec any
	_ = json.Unmarshal(r.Spec, &spec)
	return &resourceDoc{Kind: manifest.KindResource, Type: r.TypeName + "/" + r.TypeVersion,
		Metadata: resourceMD{Name: r.Name, Namespace: r.Namespace, Labels: r.Labels, Annotations: r.Annotations}, Spec: spec}
}
