package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/cli/printer"
	"github.com/no8s/no8s/services/internal/manifest"
)

// pollInterval is how often wait and delete --wait read the resource.
const pollInterval = 250 * time.Millisecond

// progressEvery is how often a long wait says on stderr what it waits for.
const progressEvery = 5 * time.Second

func (a *app) deleteCmd() *cobra.Command {
	var (
		files   fileFlags
		wait    bool
		timeout time.Duration
		dryRun  string
		cascade string
	)
	cmd := &cobra.Command{
		Use:   "delete (TYPE[/VERSION] NAME... | namespace NAME... | -f FILE|FOLDER|-)",
		Short: "Delete resources or namespaces (and, with -f, every object of the documents)",
		Long: `Requests deletion: a resource turns deleting, its reconciler cleans up and
removes its finalizer, and it is gone. --wait waits until it is gone (at most
--timeout; progress on stderr).

delete namespace NAME deletes a namespace: it turns terminating, each of its
resources is deleted as above, and the namespace goes with the last of them.
--wait waits until it is gone, saying on stderr which resources still hold it.

With -f, every object of the documents is deleted, resources first, then
webhooks, then types, then namespaces (a type cannot go while resources of it
remain: use --wait).`,
		Example: `  no8s delete DatabaseCluster/v1 production-pg --wait
  no8s delete namespace team-a --wait --timeout 5m
  no8s delete -f db.yaml --wait --timeout 2m`,
		ValidArgsFunction: a.completeTypes,
		RunE: func(cmd *cobra.Command, args []string) error {
			dry, err := parseDryRun(dryRun)
			if err != nil {
				return err
			}
			policy, err := lifecycle.ParsePropagation(cascade)
			if err != nil {
				return usagef("--cascade=%s: must be background, foreground or orphan", cascade)
			}
			if (len(files.files) > 0) == (len(args) > 0) {
				return usagef("name what to delete either as TYPE[/VERSION] NAME... or with -f, not both or neither")
			}
			if len(args) == 1 {
				return usagef("expected TYPE[/VERSION] NAME... or namespace NAME...: give at least one NAME")
			}
			if len(args) > 0 && isNamespaceNoun(args[0]) {
				if err := namespaceArgs(args[1:]); err != nil {
					return err
				}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			deadline := time.Now().Add(timeout)
			if len(args) > 0 && isNamespaceNoun(args[0]) {
				var failed []error
				for _, name := range args[1:] {
					if err := a.deleteNamespace(ctx, c, name, dry, wait, deadline); err != nil {
						failed = append(failed, fmt.Errorf("%s: %w", manifest.NamespaceKey(name), err))
					}
				}
				return errors.Join(failed...)
			}
			if len(args) > 0 {
				var failed []error
				for _, name := range args[1:] {
					if err := a.deleteResource(ctx, c, []string{args[0], name}, policy, dry, wait, deadline); err != nil {
						failed = append(failed, err)
					}
				}
				return errors.Join(failed...)
			}
			docs, err := a.read(files)
			if err != nil {
				return err
			}
			slices.Reverse(docs)
			var failed []error
			for _, d := range docs {
				if err := a.deleteDoc(ctx, c, d, policy, dry, wait, deadline); err != nil {
					failed = append(failed, fmt.Errorf("%s: %s: %w", d.Source, d.Key(), err))
				}
			}
			return errors.Join(failed...)
		},
	}
	files.add(cmd, "whose objects to delete")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until each resource (or namespace) is gone")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "with --wait, how long to wait in all")
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", `"server": the server checks everything and deletes nothing`)
	cmd.Flags().StringVar(&cascade, "cascade", "background", `what becomes of the resources each one owns: "background" (deleted after it), "foreground" (deleted before it: it stays deleting until they are gone) or "orphan" (kept, without their reference to it)`)
	return cmd
}

func (a *app) deleteResource(ctx context.Context, c *client.Client, args []string, policy lifecycle.Propagation, dry, wait bool, deadline time.Time) error {
	r, err := a.target(ctx, c, args)
	if err != nil {
		return err
	}
	return a.deleteFound(ctx, c, r, policy, dry, wait, deadline)
}

func (a *app) deleteFound(ctx context.Context, c *client.Client, r *client.Resource, policy lifecycle.Propagation, dry, wait bool, deadline time.Time) error {
	out, err := c.DeleteResource(ctx, r.ID, client.DryRunIf(dry), client.WithPropagation(policy))
	if err != nil {
		return err
	}
	if dry {
		fmt.Fprintf(a.streams.Out, "%s deleted (server dry run)\n", key(r))
		return nil
	}
	fmt.Fprintf(a.streams.Out, "%s deletion requested\n", key(r))
	if !wait {
		return nil
	}
	if err := a.waitGone(ctx, c, out, deadline); err != nil {
		return err
	}
	fmt.Fprintf(a.streams.Out, "%s deleted\n", key(r))
	return nil
}

func (a *app) deleteDoc(ctx context.Context, c *client.Client, d manifest.Document, policy lifecycle.Propagation, dry, wait bool, deadline time.Time) error {
	switch {
	case d.Namespace != nil:
		err := a.deleteNamespace(ctx, c, d.Namespace.Name, dry, wait, deadline)
		if client.IsNotFound(err) {
			fmt.Fprintf(a.streams.Out, "%s not found\n", d.Key())
			return nil
		}
		return err
	case d.Resource != nil:
		r, err := c.GetResource(ctx, d.Resource.TypeName, d.Resource.TypeVersion, d.Resource.Namespace, d.Resource.Name)
		if client.IsNotFound(err) {
			fmt.Fprintf(a.streams.Out, "%s not found\n", d.Key())
			return nil
		}
		if err != nil {
			return err
		}
		return a.deleteFound(ctx, c, r, policy, dry, wait, deadline)
	case d.Webhook != nil:
		h, err := c.GetWebhookByName(ctx, d.Webhook.Name)
		if err != nil {
			return err
		}
		if h == nil {
			fmt.Fprintf(a.streams.Out, "%s not found\n", d.Key())
			return nil
		}
		if err := c.DeleteWebhook(ctx, h.ID, client.DryRunIf(dry)); err != nil {
			return err
		}
	case d.Type != nil:
		t, err := c.GetType(ctx, d.Type.Name, d.Type.Version)
		if client.IsNotFound(err) {
			fmt.Fprintf(a.streams.Out, "%s not found\n", d.Key())
			return nil
		}
		if err != nil {
			return err
		}
		if err := c.DeleteType(ctx, t.ID, client.DryRunIf(dry)); err != nil {
			return err
		}
	}
	suffix := ""
	if dry {
		suffix = " (server dry run)"
	}
	fmt.Fprintf(a.streams.Out, "%s deleted%s\n", d.Key(), suffix)
	return nil
}

// waitGone waits until the resource is gone or the deadline passes.
func (a *app) waitGone(ctx context.Context, c *client.Client, r *client.Resource, deadline time.Time) error {
	start, last := time.Now(), time.Now()
	state := func(cur *client.Resource) string {
		return fmt.Sprintf("status %s, finalizers %s", cur.Status, listOrNone(cur.Finalizers))
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err := c.WaitDeleted(wctx, r.ID, client.WaitOptions{Interval: pollInterval, Progress: func(cur *client.Resource) {
		r = cur
		if time.Since(last) >= progressEvery {
			a.progress("waiting for %s to be deleted (%s): %s", key(r), time.Since(start).Round(time.Second), state(cur))
			last = time.Now()
		}
	}})
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return fmt.Errorf("timed out after %s waiting for %s to be deleted: %s", time.Since(start).Round(time.Second), key(r), state(r))
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (a *app) reconcileCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "reconcile TYPE[/VERSION] NAME",
		Short:             "Reconcile a resource now (also when failing with backoff)",
		Example:           `  no8s reconcile DatabaseCluster/v1 production-pg`,
		Args:              func(_ *cobra.Command, args []string) error { return exactArgs(2, "TYPE[/VERSION] NAME")(args) },
		ValidArgsFunction: a.completeTypes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := a.target(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			if _, err := c.Reconcile(cmd.Context(), r.ID); err != nil {
				return err
			}
			fmt.Fprintf(a.streams.Out, "%s reconcile requested\n", key(r))
			return nil
		},
	}
}

func (a *app) historyCmd() *cobra.Command {
	var (
		output string
		limit  int
	)
	cmd := &cobra.Command{
		Use:               "history TYPE[/VERSION] NAME",
		Short:             "List a resource's reconcile attempts, newest first",
		Example:           `  no8s history DatabaseCluster/v1 production-pg --limit 5`,
		Args:              func(_ *cobra.Command, args []string) error { return exactArgs(2, "TYPE[/VERSION] NAME")(args) },
		ValidArgsFunction: a.completeTypes,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != printer.FormatJSON && output != printer.FormatYAML {
				return usagef("-o %q: history prints json or yaml (or a table without -o)", output)
			}
			if limit < 1 || limit > 500 {
				return usagef("--limit %d: between 1 and 500", limit)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := a.target(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			h, err := c.History(cmd.Context(), r.ID, limit)
			if err != nil {
				return err
			}
			return printer.History(a.streams.Out, h, output, a.now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many attempts (1-500)")
	return cmd
}

func (a *app) outputsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "outputs TYPE[/VERSION] NAME",
		Short:             "Print the outputs a resource's reconciler reported",
		Example:           `  no8s outputs PostgresDatabase/v1 orders -o json`,
		Args:              func(_ *cobra.Command, args []string) error { return exactArgs(2, "TYPE[/VERSION] NAME")(args) },
		ValidArgsFunction: a.completeTypes,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != printer.FormatJSON && output != printer.FormatYAML {
				return usagef("-o %q: outputs prints json or yaml", output)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := a.target(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			out, err := c.Outputs(cmd.Context(), r.ID)
			if err != nil {
				return err
			}
			if len(out) == 0 {
				out = []byte("{}")
			}
			return printer.Raw(a.streams.Out, out, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", printer.FormatYAML, "json or yaml")
	return cmd
}

// waitFor is a parsed --for.
type waitFor struct {
	deleted   bool
	condition string
	status    string
}

func parseWaitFor(v string) (waitFor, error) {
	if v == "delete" {
		return waitFor{deleted: true}, nil
	}
	rest, ok := strings.CutPrefix(v, "condition=")
	if !ok || rest == "" {
		return waitFor{}, usagef("--for=%q: use condition=NAME (status True), condition=NAME=STATUS, or delete", v)
	}
	name, status, ok := strings.Cut(rest, "=")
	if !ok {
		status = "True"
	}
	switch strings.ToLower(status) {
	case "true":
		status = "True"
	case "false":
		status = "False"
	case "unknown":
		status = "Unknown"
	default:
		return waitFor{}, usagef("--for=%q: a condition's status is True, False or Unknown", v)
	}
	return waitFor{condition: name, status: status}, nil
}

func (w waitFor) String() string {
	if w.deleted {
		return "deletion"
	}
	return "condition " + w.condition + "=" + w.status
}

// met reports whether r meets the condition for its current generation,
// and describes where it stands.
func (w waitFor) met(r *client.Resource) (bool, string) {
	state := fmt.Sprintf("status %s, phase %s", r.Status, r.Phase)
	for _, cd := range r.Conditions {
		if cd.Type != w.condition {
			continue
		}
		state += ", " + describeCondition(cd)
		current := cd.ObservedGeneration == 0 || cd.ObservedGeneration >= r.Generation
		if !current {
			state += fmt.Sprintf(" [for generation %d, the resource is at %d]", cd.ObservedGeneration, r.Generation)
		}
		met := string(cd.Status) == w.status && current
		if !met {
			state += blocking(r, w.condition)
		}
		return met, state
	}
	state += ", no " + w.condition + " condition yet"
	if r.StatusMessage != "" {
		state += ": " + oneLine(r.StatusMessage)
	}
	return false, state + blocking(r, w.condition)
}

// describeCondition is "Type=Status (Reason): message".
func describeCondition(cd client.Condition) string {
	s := fmt.Sprintf("%s=%s", cd.Type, cd.Status)
	if cd.Reason != "" {
		s += " (" + cd.Reason + ")"
	}
	if cd.Message != "" {
		s += ": " + oneLine(cd.Message)
	}
	return s
}

// blocking lists the conditions other than the awaited one that are not
// True (for example ReconcilerAvailable=False (ReconcilerNotResponding):
// who should have taken the work), which say why a wait does not end.
func blocking(r *client.Resource, awaited string) string {
	var s string
	for _, cd := range r.Conditions {
		if cd.Type != awaited && string(cd.Status) != "True" {
			s += "; " + describeCondition(cd)
		}
	}
	return s
}

func (a *app) waitCmd() *cobra.Command {
	var (
		forFlag string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wait TYPE[/VERSION] NAME... --for=condition=Ready",
		Short: "Wait until resources meet a condition (or are deleted)",
		Long: `Waits, as kubectl wait does, until every named resource has the condition with
the status (True unless given) for its current generation, or, with
--for=delete, is gone. Says on stderr every 5 s what it is waiting for. Fails
after --timeout with where each resource stands.`,
		Example: `  no8s wait DatabaseCluster/v1 production-pg --for=condition=Ready --timeout=2m
  no8s wait DatabaseCluster/v1 production-pg --for=delete`,
		ValidArgsFunction: a.completeTypes,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("expected TYPE[/VERSION] NAME...")
			}
			if forFlag == "" {
				return usagef("--for is required: condition=Ready, condition=NAME=STATUS or delete")
			}
			w, err := parseWaitFor(forFlag)
			if err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			deadline := time.Now().Add(timeout)
			for _, name := range args[1:] {
				r, err := a.target(ctx, c, []string{args[0], name})
				if w.deleted && client.IsNotFound(err) {
					// Already gone counts as deleted, as with kubectl
					// wait; a type that does not exist is still an error.
					t, perr := parseTypeRef(args[0])
					if perr != nil {
						return perr
					}
					if err := typeExists(ctx, c, t); err != nil {
						return err
					}
					fmt.Fprintf(a.streams.Out, "%s %s/%s deleted\n", t, names.OrDefault(a.namespace()), name)
					continue
				}
				if err != nil {
					return err
				}
				if w.deleted {
					if err := a.waitGone(ctx, c, r, deadline); err != nil {
						return err
					}
					fmt.Fprintf(a.streams.Out, "%s deleted\n", key(r))
					continue
				}
				if err := a.waitCondition(ctx, c, r, w, deadline, timeout); err != nil {
					return err
				}
				fmt.Fprintf(a.streams.Out, "%s %s met\n", key(r), w)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&forFlag, "for", "", "condition=NAME[=STATUS] or delete")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait in all")
	return cmd
}

func (a *app) waitCondition(ctx context.Context, c *client.Client, r *client.Resource, w waitFor, deadline time.Time, timeout time.Duration) error {
	if ok, _ := w.met(r); ok {
		return nil
	}
	start, last := time.Now(), time.Now()
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_, err := c.Wait(wctx, r.ID, func(cur *client.Resource) bool {
		r = cur
		ok, _ := w.met(cur)
		return ok
	}, client.WaitOptions{Interval: pollInterval, Progress: func(cur *client.Resource) {
		if time.Since(last) >= progressEvery {
			_, state := w.met(cur)
			a.progress("waiting for %s on %s (%s): %s", w, key(r), time.Since(start).Round(time.Second), state)
			last = time.Now()
		}
	}})
	switch {
	case errors.Is(err, client.ErrDeleted):
		return fmt.Errorf("%s was deleted while waiting for %s", key(r), w)
	case err != nil && ctx.Err() == nil && wctx.Err() != nil:
		_, state := w.met(r)
		return fmt.Errorf("timed out after %s waiting for %s on %s: %s", timeout, w, key(r), state)
	}
	return err
}
