package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/cli/printer"
	"github.com/no8s/no8s/services/internal/manifest"
	"github.com/no8s/no8s/services/internal/resource"
)

// isNamespaceNoun reports whether a command's first argument names
// namespaces (get namespaces, delete namespace X, describe ns X). Type
// names start with an upper-case letter, so these never shadow a type.
func isNamespaceNoun(arg string) bool {
	switch arg {
	case "namespaces", "namespace", "ns":
		return true
	}
	return false
}

// namespaceArgs checks namespace names given on the command line.
func namespaceArgs(args []string) error {
	for _, n := range args {
		if fe := names.Namespace("", n); fe != nil {
			return usagef("%s", fe.Message)
		}
	}
	return nil
}

// namespaceView is what apply owns of a namespace (its name), in the
// document format: what diff compares.
func namespaceView(ns *client.Namespace) map[string]any {
	if ns == nil {
		return nil
	}
	return map[string]any{"kind": manifest.KindNamespace, "metadata": map[string]any{"name": ns.Name}}
}

// terminatingError is apply's answer for a namespace being deleted: it
// cannot be applied until it is gone.
func terminatingError(ns *client.Namespace) error {
	since := ""
	if ns.DeletedAt != nil {
		since = " since " + ns.DeletedAt.UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("namespace %s is being deleted (terminating%s): apply again once it is gone (no8s get namespace %s)", ns.Name, since, ns.Name)
}

// applyNamespace creates a namespace that does not exist; one that exists
// is left as it is (a namespace has nothing else to change).
func applyNamespace(ctx context.Context, c *client.Client, ns *manifest.Namespace, dry bool) (string, any, error) {
	cur, err := c.GetNamespace(ctx, ns.Name)
	if client.IsNotFound(err) {
		out, cerr := c.CreateNamespace(ctx, ns.Name, client.DryRunIf(dry))
		var ae *client.Error
		if !errors.As(cerr, &ae) || ae.Status != http.StatusConflict || ae.Code != "name_taken" {
			return resultCreated, out, cerr
		}
		// Created meanwhile by someone else: as if it had been there.
		cur, err = c.GetNamespace(ctx, ns.Name)
	}
	if err != nil {
		return "", nil, err
	}
	if cur.Status == resource.NamespaceTerminating {
		return "", nil, terminatingError(cur)
	}
	return resultUnchanged, cur, nil
}

// namespaceDiffViews returns the live namespace's view (nil when missing)
// and the applied one.
func namespaceDiffViews(ctx context.Context, c *client.Client, ns *manifest.Namespace) (any, any, error) {
	cur, err := c.GetNamespace(ctx, ns.Name)
	if client.IsNotFound(err) {
		would, err := c.CreateNamespace(ctx, ns.Name, client.DryRunIf(true))
		if err != nil {
			return nil, nil, err
		}
		return nil, namespaceView(would), nil
	}
	if err != nil {
		return nil, nil, err
	}
	if cur.Status == resource.NamespaceTerminating {
		return nil, nil, terminatingError(cur)
	}
	return namespaceView(cur), namespaceView(cur), nil
}

// getNamespaces is get namespaces [NAME].
func (a *app) getNamespaces(ctx context.Context, c *client.Client, args []string, output string) error {
	now := a.now()
	if len(args) == 2 {
		if err := namespaceArgs(args[1:]); err != nil {
			return err
		}
		ns, err := c.GetNamespace(ctx, args[1])
		if err != nil {
			return err
		}
		if output == printer.FormatJSON || output == printer.FormatYAML {
			return printer.Document(a.streams.Out, ns, output)
		}
		return printer.Namespaces(a.streams.Out, []client.Namespace{*ns}, output, now)
	}
	nss, err := c.ListNamespaces(ctx)
	if err != nil {
		return err
	}
	return printer.Namespaces(a.streams.Out, nss, output, now)
}

// deleteNamespace requests deletion of a namespace and, with wait, waits
// until it is gone.
func (a *app) deleteNamespace(ctx context.Context, c *client.Client, name string, dry, wait bool, deadline time.Time) error {
	out, err := c.DeleteNamespace(ctx, name, client.DryRunIf(dry))
	if err != nil {
		return err
	}
	key := manifest.NamespaceKey(name)
	if dry {
		fmt.Fprintf(a.streams.Out, "%s deleted (server dry run)\n", key)
		return nil
	}
	fmt.Fprintf(a.streams.Out, "%s deletion requested (%s)\n", key, out.Status)
	if !wait {
		return nil
	}
	if err := a.waitNamespaceGone(ctx, c, name, deadline); err != nil {
		return err
	}
	fmt.Fprintf(a.streams.Out, "%s deleted\n", key)
	return nil
}

// waitNamespaceGone polls until the namespace is gone (404) or the
// deadline passes; progress and the timeout say which resources still hold
// it.
func (a *app) waitNamespaceGone(ctx context.Context, c *client.Client, name string, deadline time.Time) error {
	start, last := time.Now(), time.Now()
	key := manifest.NamespaceKey(name)
	for {
		ns, err := c.GetNamespace(ctx, name)
		if client.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		late := time.Now().After(deadline)
		if late || time.Since(last) >= progressEvery {
			state := ns.Status
			if left, err := namespaceRemains(ctx, c, name); err == nil {
				state += ", " + left
			}
			if late {
				return fmt.Errorf("timed out after %s waiting for %s to be deleted: %s", time.Since(start).Round(time.Second), key, state)
			}
			a.progress("waiting for %s to be deleted (%s): %s", key, time.Since(start).Round(time.Second), state)
			last = time.Now()
		}
		if err := sleepCtx(ctx, pollInterval); err != nil {
			return err
		}
	}
}

// remainsShown is how many of a terminating namespace's resources progress
// notes name.
const remainsShown = 5

// namespaceRemains says which resources are left in a namespace: "no
// resources left", or "2 resources left: DatabaseCluster/v1 x (deleting,
// finalizers reconciler.no8s.io/noop), ...".
func namespaceRemains(ctx context.Context, c *client.Client, name string) (string, error) {
	page, err := c.ListPage(ctx, client.ListOptions{Namespace: name, Limit: remainsShown}, "")
	if err != nil {
		return "", err
	}
	items, more := page.Items, page.Continue != ""
	if len(items) == 0 {
		return "no resources left", nil
	}
	parts := make([]string, 0, len(items))
	for _, r := range items {
		parts = append(parts, fmt.Sprintf("%s/%s %s (%s, finalizers %s)", r.ResourceTypeName, r.ResourceTypeVersion, r.Name, r.Status, listOrNone(r.Finalizers)))
	}
	count := fmt.Sprintf("%d resource(s) left", len(items))
	if more {
		count = fmt.Sprintf("more than %d resources left, among them", len(items))
	}
	return count + ": " + strings.Join(parts, ", "), nil
}

// describeNamespace writes the describe page of a namespace: identity,
// status, and its resources counted by type and status.
func describeNamespace(w io.Writer, ns *client.Namespace, items []client.Resource, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	kv("Name", ns.Name)
	kv("UID", ns.UID)
	kv("Status", ns.Status)
	kv("Created", ns.CreatedAt.UTC().Format(time.RFC3339)+" ("+printer.Age(now, ns.CreatedAt)+" ago)")
	if ns.DeletedAt != nil {
		kv("Deletion requested", ns.DeletedAt.UTC().Format(time.RFC3339)+" ("+printer.Age(now, *ns.DeletedAt)+" ago)")
	}
	kv("Resource version", fmt.Sprint(ns.ResourceVersion))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Resources:")
	if len(items) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	byType := map[string]map[string]int{}
	for _, r := range items {
		t := r.ResourceTypeName + "/" + r.ResourceTypeVersion
		if byType[t] == nil {
			byType[t] = map[string]int{}
		}
		byType[t][r.Status]++
	}
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tCOUNT\tSTATUS")
	for _, t := range slices.Sorted(maps.Keys(byType)) {
		total, parts := 0, []string(nil)
		for _, st := range resource.Statuses {
			if n := byType[t][st]; n > 0 {
				total += n
				parts = append(parts, fmt.Sprintf("%d %s", n, st))
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", t, total, strings.Join(parts, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if ns.Status == resource.NamespaceTerminating {
		fmt.Fprintln(w, "Waiting for:")
		shown := 0
		for _, r := range items {
			if shown == remainsShown {
				fmt.Fprintf(w, "  and %d more\n", len(items)-shown)
				break
			}
			fmt.Fprintf(w, "  %s/%s %s: %s, finalizers %s\n", r.ResourceTypeName, r.ResourceTypeVersion, r.Name, r.Status, listOrNone(r.Finalizers))
			shown++
		}
	}
	return nil
}
