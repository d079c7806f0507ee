package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/cli/printer"
)

func (a *app) getCmd() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get namespaces|types|webhooks|resources|TYPE[/VERSION] [NAME]",
		Short: "List namespaces, resource types, webhooks or resources, or show one",
		Long: `Lists namespaces (get namespaces, or ns), resource types (get types), admission
webhooks (get webhooks), every resource of the namespace (get resources; -A for
every namespace), the resources of one type (get DatabaseCluster or
DatabaseCluster/v1), or one of them by name. Lists read every page.

-w (--watch) lists, then prints every later change as it happens: it starts
from the list's revision and, when the connection drops (a gateway restart),
resumes from the last revision it saw, so no change is missed or printed twice;
when the server no longer holds the history to resume from, it lists again.
Notes about reconnecting go to stderr. In a table, the listed rows are aligned
with the header and every change prints a row in the same columns; a resource
that is gone (its deletion finished) prints a last row with STATUS deleted.
With -o json or -o yaml a watch prints one
{"type": ..., "revision": ..., "resource": ...} document per change.`,
		Example: `  no8s get namespaces
  no8s get types
  no8s get DatabaseCluster/v1
  no8s get DatabaseCluster/v1 -n team-a
  no8s get DatabaseCluster/v1 production-pg -o yaml
  no8s get resources -A -l tier=db -o wide
  no8s get DatabaseCluster -w`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("expected what to get (namespaces, types, webhooks, resources or a TYPE) and optionally a NAME")
			}
			return nil
		},
		ValidArgsFunction: a.completeTypes,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runGet(cmd.Context(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "json, yaml, wide or name")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector: app=web,tier!=db,env in (prod,stage),!legacy")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, print every change until interrupted (resumes across reconnects)")
	f.BoolVarP(&a.allNamespaces, "all-namespaces", "A", false, "every namespace")
	f.IntVar(&o.chunk, "chunk-size", 500, "items per page read from the server (1-1000)")
	return cmd
}

// getOptions are get's flags (-A is the app's allNamespaces).
type getOptions struct {
	output, selector string
	watch            bool
	chunk            int
}

// runGet runs get: namespaces, types, webhooks, or resources (a TYPE or
// "resources").
func (a *app) runGet(ctx context.Context, args []string, o *getOptions) error {
	if err := printer.CheckFormat(o.output); err != nil {
		return usagef("%v", err)
	}
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	now := a.now()
	switch {
	case isNamespaceNoun(args[0]):
		if o.watch || o.selector != "" {
			return usagef("-w and -l apply to resources only (namespaces have no events and no labels)")
		}
		return a.getNamespaces(ctx, c, args, o.output)
	}
	switch args[0] {
	case "types", "type", "resource-types":
		return a.getTypes(ctx, c, args, o, now)
	case "webhooks", "webhook", "admission-webhooks":
		return a.getWebhooks(ctx, c, args, o, now)
	}
	return a.getResources(ctx, c, args, o, now)
}

// getTypes lists the resource types, or shows the one named in args[1].
func (a *app) getTypes(ctx context.Context, c *client.Client, args []string, o *getOptions, now time.Time) error {
	if o.watch || o.selector != "" {
		return usagef("-w and -l apply to resources only")
	}
	name := ""
	if len(args) == 2 {
		name = args[1]
	}
	types, err := c.ListTypes(ctx, name)
	if err != nil {
		return err
	}
	return printer.Types(a.streams.Out, types, o.output, now)
}

// getWebhooks lists the admission webhooks, or shows the one named in
// args[1].
func (a *app) getWebhooks(ctx context.Context, c *client.Client, args []string, o *getOptions, now time.Time) error {
	if o.watch || o.selector != "" {
		return usagef("-w and -l apply to resources only")
	}
	hooks, err := c.ListWebhooks(ctx)
	if err != nil {
		return err
	}
	if len(args) == 2 {
		hooks = slices.DeleteFunc(hooks, func(h client.Webhook) bool { return h.Name != args[1] })
		if len(hooks) == 0 {
			return fmt.Errorf("admission webhook %q not found", args[1])
		}
	}
	return printer.Webhooks(a.streams.Out, hooks, o.output, now)
}

// getResources lists (or watches) the resources of args[0], a TYPE or
// "resources" (every type), or shows the one named in args[1].
func (a *app) getResources(ctx context.Context, c *client.Client, args []string, o *getOptions, now time.Time) error {
	opts := client.ListOptions{Namespace: a.namespace(), LabelSelector: o.selector, Limit: o.chunk}
	if args[0] != "resources" && args[0] != "all" {
		t, err := parseTypeRef(args[0])
		if err != nil {
			return err
		}
		if len(args) == 2 {
			return a.getResource(ctx, c, args, o, now)
		}
		if err := typeExists(ctx, c, t); err != nil {
			return err
		}
		opts.TypeName, opts.TypeVersion = t.name, t.version
	} else if len(args) == 2 {
		return usagef("a NAME needs a TYPE: no8s get DatabaseCluster/v1 NAME")
	}
	if o.watch {
		return a.watch(ctx, c, opts, o.output)
	}
	items, _, err := c.ListResources(ctx, opts)
	if err != nil {
		return err
	}
	if len(items) == 0 && (o.output == printer.FormatTable || o.output == printer.FormatWide) {
		where := "namespace " + opts.Namespace
		if opts.Namespace == "" {
			where = "any namespace"
		}
		fmt.Fprintf(a.streams.Err, "No resources found in %s.\n", where)
		return nil
	}
	return printer.Resources(a.streams.Out, items, o.output, now)
}

// getResource shows the resource TYPE NAME of args.
func (a *app) getResource(ctx context.Context, c *client.Client, args []string, o *getOptions, now time.Time) error {
	if o.watch {
		return usagef("-w watches a list: leave the NAME out and select with -l")
	}
	if a.allNamespaces {
		return usagef("a resource cannot be read by name across every namespace: name its namespace with -n, not -A")
	}
	r, err := a.target(ctx, c, args)
	if err != nil {
		return err
	}
	if o.output == printer.FormatJSON || o.output == printer.FormatYAML {
		return printer.Document(a.streams.Out, r, o.output)
	}
	return printer.Resources(a.streams.Out, []client.Resource{*r}, o.output, now)
}

// watch lists, then prints every change. In a table, the listed rows are
// aligned with the header and later rows keep those columns; a resource
// whose row is gone (PURGED) prints a last row with STATUS deleted, as
// kubectl prints the row of a deleted object.
func (a *app) watch(ctx context.Context, c *client.Client, opts client.ListOptions, output string) error {
	wide := output == printer.FormatWide
	var table *printer.WatchTable
	row := func(r *client.Resource, event string) []string {
		if event == client.EventPurged {
			gone := *r
			gone.Status = "deleted"
			r = &gone
		}
		return printer.ResourceRow(r, wide, a.now())
	}
	rowOut := func(r *client.Resource, event string) error {
		switch output {
		case printer.FormatJSON, printer.FormatYAML:
			return printer.Document(a.streams.Out, client.Event{Type: event, Revision: r.ResourceVersion, Resource: r}, compactFormat(output))
		case printer.FormatName:
			_, err := fmt.Fprintln(a.streams.Out, printer.Name(r))
			return err
		}
		return table.Row(row(r, event))
	}
	listed := func(items []client.Resource, _ int64) error {
		if output == printer.FormatTable || wide {
			rows := make([][]string, len(items))
			for i := range items {
				rows[i] = row(&items[i], "LISTED")
			}
			var err error
			table, err = printer.NewResourceWatchTable(a.streams.Out, rows, wide)
			return err
		}
		for i := range items {
			if err := rowOut(&items[i], "LISTED"); err != nil {
				return err
			}
		}
		return nil
	}
	return ignoreCanceled(c.ListAndWatch(ctx, opts, listed, client.WatchHandler{
		Relisted: func(items []client.Resource, _ int64) error {
			for i := range items {
				if err := rowOut(&items[i], "LISTED"); err != nil {
					return err
				}
			}
			return nil
		},
		Event: func(ev client.Event) error {
			if ev.Resource == nil {
				return nil
			}
			if output == printer.FormatJSON || output == printer.FormatYAML {
				return printer.Document(a.streams.Out, ev, compactFormat(output))
			}
			return rowOut(ev.Resource, ev.Type)
		},
		Progress: func(msg string) { a.progress("%s", msg) },
	}))
}

// compactFormat: a watch prints JSON one document per line.
func compactFormat(f string) string {
	if f == printer.FormatJSON {
		return printer.FormatJSONLine
	}
	return f
}

// ignoreCanceled turns the end of a watch by Ctrl-C into success.
func ignoreCanceled(err error) error {
	if err != nil && (err == context.Canceled || strings.Contains(err.Error(), context.Canceled.Error())) {
		return nil
	}
	return err
}

func (a *app) describeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe TYPE[/VERSION] NAME | describe namespace NAME",
		Short: "Show a resource (with its Events) or a namespace in detail",
		Long: `Shows one resource for a person: identity, labels and annotations, spec, status
and phase, conditions, outputs, finalizers, owner references, its 10 newest
reconcile attempts, and its 20 newest Events (the records reconcilers and
controllers attach to it: type, reason, age, source, message; a repeated one
with its count), oldest first.

describe namespace NAME shows a namespace: its status, and its resources
counted by type and status (while it is terminating, those still holding it).`,
		Example: `  no8s describe DatabaseCluster/v1 production-pg
  no8s describe namespace team-a`,
		Args:              func(_ *cobra.Command, args []string) error { return exactArgs(2, "TYPE[/VERSION] NAME")(args) },
		ValidArgsFunction: a.completeTypes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if isNamespaceNoun(args[0]) {
				if err := namespaceArgs(args[1:]); err != nil {
					return err
				}
				ns, err := c.GetNamespace(cmd.Context(), args[1])
				if err != nil {
					return err
				}
				items, _, err := c.ListResources(cmd.Context(), client.ListOptions{Namespace: ns.Name})
				if err != nil {
					return err
				}
				return describeNamespace(a.streams.Out, ns, items, a.now())
			}
			r, err := a.target(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			hist, err := c.History(cmd.Context(), r.ID, describeHistory)
			if err != nil {
				return err
			}
			events, err := c.EventRecords(cmd.Context(), r.ID, describeEvents)
			return describe(a.streams.Out, r, hist, eventsOrError{events, err}, a.now())
		},
	}
	return cmd
}

// What describe shows of a resource's past: its newest reconcile attempts
// and Events.
const (
	describeHistory = 10
	describeEvents  = 20
)

// eventsOrError is a resource's Events, or why they could not be read
// (describe shows the rest of the page anyway).
type eventsOrError struct {
	items []client.EventRecord
	err   error
}

// describe writes the describe page of r.
func describe(w io.Writer, r *client.Resource, hist []client.HistoryEntry, events eventsOrError, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	kv("Name", r.Name)
	kv("Namespace", r.Namespace)
	kv("Type", r.ResourceTypeName+"/"+r.ResourceTypeVersion)
	kv("ID", fmt.Sprint(r.ID))
	kv("UID", r.UID)
	kv("Labels", mapLines(r.Labels))
	kv("Annotations", mapLines(r.Annotations))
	kv("Created", r.CreatedAt.UTC().Format(time.RFC3339)+" ("+printer.Age(now, r.CreatedAt)+" ago)")
	if r.DeletedAt != nil {
		kv("Deletion requested", r.DeletedAt.UTC().Format(time.RFC3339))
	}
	kv("Generation", fmt.Sprintf("%d (observed %d)", r.Generation, r.ObservedGeneration))
	kv("Resource version", fmt.Sprint(r.ResourceVersion))
	kv("Status", r.Status)
	kv("Phase", r.Phase)
	if r.StatusMessage != "" {
		kv("Message", r.StatusMessage)
	}
	if r.LastReconcileTime != nil {
		kv("Last reconcile", r.LastReconcileTime.UTC().Format(time.RFC3339)+" ("+printer.Age(now, *r.LastReconcileTime)+" ago)")
	}
	kv("Finalizers", listOrNone(r.Finalizers))
	var owners []string
	for _, o := range r.OwnerReferences {
		s := o.ResourceTypeName + "/" + o.ResourceTypeVersion + " " + o.Name + " (uid " + o.UID + ")"
		if o.Controller {
			s += " controller"
		}
		owners = append(owners, s)
	}
	kv("Owner references", listOrNone(owners))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Spec:")
	if err := indented(w, r.Spec); err != nil {
		return err
	}
	fmt.Fprintln(w, "Conditions:")
	if len(r.Conditions) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, cd := range r.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cd.Type, cd.Status, cd.Reason, printer.Age(now, cd.LastTransitionTime), oneLine(cd.Message))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "Outputs:")
	if len(r.Outputs) == 0 || string(r.Outputs) == "{}" || string(r.Outputs) == "null" {
		fmt.Fprintln(w, "  <none>")
	} else if err := indented(w, r.Outputs); err != nil {
		return err
	}
	fmt.Fprintln(w, "Recent history:")
	if len(hist) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  GENERATION\tREASON\tRESULT\tDURATION\tAGE\tERROR")
		for _, h := range hist {
			res, msg := "success", ""
			if !h.Success {
				res = "failure"
			}
			if h.ErrorMessage != nil {
				msg = oneLine(*h.ErrorMessage)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", h.Generation, h.Reason, res, time.Duration(h.DurationMS)*time.Millisecond, printer.AgeOf(now, h.StartedAt), msg)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return describeEventRecords(w, events, now)
}

// describeEventRecords writes the Events section, oldest first as kubectl
// does; a record that repeated shows its count: "5m (x14 over 2h)".
func describeEventRecords(w io.Writer, events eventsOrError, now time.Time) error {
	fmt.Fprintln(w, "Events:")
	switch {
	case events.err != nil:
		fmt.Fprintf(w, "  <could not be read: %s>\n", oneLine(events.err.Error()))
		return nil
	case len(events.items) == 0:
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tREASON\tAGE\tFROM\tMESSAGE")
	for i := len(events.items) - 1; i >= 0; i-- {
		e := events.items[i]
		age := printer.Age(now, e.LastTime)
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", age, e.Count, printer.Age(now, e.FirstTime))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, e.Source, oneLine(e.Message))
	}
	return tw.Flush()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func listOrNone(v []string) string {
	if len(v) == 0 {
		return "<none>"
	}
	return strings.Join(v, ", ")
}

func mapLines(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

// indented writes a JSON document as YAML indented by two spaces.
func indented(w io.Writer, doc json.RawMessage) error {
	y, err := printer.JSONToYAML(doc)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
		fmt.Fprintln(w, "  "+l)
	}
	return nil
}

// completeTypes completes the first argument with the keywords and the
// registered types (as Name/version).
func (a *app) completeTypes(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		if isNamespaceNoun(args[0]) {
			return a.completeNamespaces(cmd, args, toComplete)
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := []string{}
	switch cmd.Name() {
	case "get":
		out = append(out, "namespaces", "types", "webhooks", "resources")
	case "describe", "delete":
		out = append(out, "namespace")
	}
	c, err := a.client(cmd.Context())
	if err != nil {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	types, err := c.ListTypes(cmd.Context(), "")
	if err != nil {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	for _, t := range types {
		out = append(out, t.Name+"/"+t.Version)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeNamespaces completes a namespace name (-n, delete namespace, ...)
// from the server.
func (a *app) completeNamespaces(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	c, err := a.client(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	nss, err := c.ListNamespaces(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := make([]string, 0, len(nss))
	for _, n := range nss {
		out = append(out, n.Name)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
