// Package flagenvtest checks that a daemon's command follows the
// environment rule of package flagenv (Check), for the table test every
// daemon's main package runs.
package flagenvtest

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/no8s/no8s/services/internal/flagenv"
)

// Old is an environment name documented before the rule, still read as an
// alias of the flag Flag of the command at Command (a path of subcommand
// names under the root, "" for the root).
type Old struct {
	Command, Flag, Env string
}

// Check builds the daemon's command with newCommand (one fresh command per
// case) and checks, for every flag of it and its subcommands that the rule
// binds: that its variable is NO8S_ and the flag's name in upper case with
// '-' as '_', that --help names that variable once (and no hand-written
// one), and that setting the variable sets the flag as the command line
// does. Then, that the flags' aliases are exactly old, that each still sets
// its flag, and that the rule's name wins over it.
func Check(t *testing.T, newCommand func() *cobra.Command, old []Old) {
	t.Helper()
	root := bound(newCommand())
	var aliases []Old
	walk(root, "", func(path string, c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !flagenv.Bound(f) {
				return
			}
			t.Run(strings.TrimSpace(path+" --"+f.Name), func(t *testing.T) { checkFlag(t, newCommand, path, f) })
			for _, a := range flagenv.Aliases(f) {
				aliases = append(aliases, Old{Command: path, Flag: f.Name, Env: a})
			}
		})
	})
	byKey := func(a, b Old) int {
		return strings.Compare(a.Command+" "+a.Flag+" "+a.Env, b.Command+" "+b.Flag+" "+b.Env)
	}
	slices.SortFunc(aliases, byKey)
	want := slices.Clone(old)
	slices.SortFunc(want, byKey)
	if !slices.Equal(aliases, want) {
		t.Errorf("the flags' aliases are\n%v\nthe documented old names\n%v", aliases, want)
	}
	for _, o := range old {
		t.Run(strings.TrimSpace(o.Command+" --"+o.Flag+" $"+o.Env), func(t *testing.T) { checkAlias(t, newCommand, o) })
	}
}

// rule is the rule, written again here so that the check does not trust
// flagenv.Name.
func rule(flag string) string {
	return "NO8S_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func checkFlag(t *testing.T, newCommand func() *cobra.Command, path string, f *pflag.Flag) {
	name := rule(f.Name)
	if got := flagenv.Name(f.Name); got != name {
		t.Fatalf("variable %s, want %s", got, name)
	}
	if n := strings.Count(f.Usage, "$"+name); n != 1 || strings.Count(f.Usage, "($") != 1 {
		t.Errorf("--help: %q, want $%s named once, in the one generated \"($...)\"", f.Usage, name)
	}
	v := sample(t, f, 0)
	fromEnv := lookup(t, newCommand, path, f.Name)
	if err := flagenv.Apply(fromEnv.fs, func(k string) string { return map[string]string{name: v}[k] }, quiet()); err != nil {
		t.Fatalf("$%s=%s: %v", name, v, err)
	}
	fromCLI := lookup(t, newCommand, path, f.Name)
	if err := fromCLI.fs.Set(f.Name, v); err != nil {
		t.Fatal(err)
	}
	if got, want := fromEnv.flag().Value.String(), fromCLI.flag().Value.String(); got != want || got == f.DefValue {
		t.Errorf("$%s=%s gives --%s %q; the command line gives %q (default %q)", name, v, f.Name, got, want, f.DefValue)
	}
}

func checkAlias(t *testing.T, newCommand func() *cobra.Command, o Old) {
	l := lookup(t, newCommand, o.Command, o.Flag)
	f := l.flag()
	old, ruled := sample(t, f, 0), sample(t, f, 1)
	if err := flagenv.Apply(l.fs, func(k string) string { return map[string]string{o.Env: old}[k] }, quiet()); err != nil {
		t.Fatalf("$%s=%s: %v", o.Env, old, err)
	}
	viaAlias := f.Value.String()
	if viaAlias == f.DefValue {
		t.Errorf("$%s=%s left --%s at its default %q", o.Env, old, o.Flag, f.DefValue)
	}
	l = lookup(t, newCommand, o.Command, o.Flag)
	env := map[string]string{o.Env: old, rule(o.Flag): ruled}
	if err := flagenv.Apply(l.fs, func(k string) string { return env[k] }, quiet()); err != nil {
		t.Fatal(err)
	}
	if got := l.flag().Value.String(); got == viaAlias {
		t.Errorf("with $%s and $%s both set, --%s is the alias's %q", rule(o.Flag), o.Env, o.Flag, got)
	}
}

// sample returns a value for f that is not its default; i picks one of two
// different ones.
func sample(t *testing.T, f *pflag.Flag, i int) string {
	t.Helper()
	switch f.Value.Type() {
	case "string", "stringArray":
		return []string{"from-env", "from-rule"}[i]
	case "stringSlice":
		return []string{"a,b", "c"}[i]
	case "int", "int32", "int64":
		return []string{"17", "18"}[i]
	case "float64":
		return []string{"0.25", "0.5"}[i]
	case "duration":
		return []string{"17s", "18s"}[i]
	case "bool":
		if (f.DefValue == "true") == (i == 0) {
			return "false"
		}
		return "true"
	case "classes":
		return []string{"loopback", "private"}[i]
	}
	t.Fatalf("--%s: no sample value of type %s", f.Name, f.Value.Type())
	return ""
}

// located is one flag of a fresh command: the flag set of the command at
// its path, as the command sees it when it runs.
type located struct {
	fs   *pflag.FlagSet
	name string
}

func (l located) flag() *pflag.Flag { return l.fs.Lookup(l.name) }

func lookup(t *testing.T, newCommand func() *cobra.Command, path, name string) located {
	t.Helper()
	c := bound(newCommand())
	if path != "" {
		var err error
		if c, _, err = c.Find(strings.Fields(path)); err != nil {
			t.Fatal(err)
		}
	}
	fs := c.LocalFlags()
	fs.AddFlagSet(c.InheritedFlags())
	if fs.Lookup(name) == nil {
		t.Fatalf("%s has no --%s", path, name)
	}
	return located{fs: fs, name: name}
}

// bound binds root as the daemon's main does, with an empty environment.
func bound(root *cobra.Command) *cobra.Command {
	flagenv.Bind(root, func(string) string { return "" }, quiet())
	return root
}

func walk(c *cobra.Command, path string, visit func(string, *cobra.Command)) {
	visit(path, c)
	for _, sub := range c.Commands() {
		walk(sub, strings.TrimSpace(path+" "+sub.Name()), visit)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
