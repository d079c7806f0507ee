// Package flagenv is the one rule by which a no8s daemon reads its
// configuration from the environment: every flag --some-name is also the
// environment variable NO8S_SOME_NAME (Name). The command line wins over the
// environment, the rule's name over an older name kept as an alias (Alias),
// and either over the flag's default:
//
//	--store-addr  >  $NO8S_STORE_ADDR  >  $OLD_NAME (deprecated)  >  default
//
// An empty variable counts as unset. An alias in use, its rule's name
// unset, is logged once at WARN as deprecated, naming the variable to use
// instead. A value the flag refuses is an error naming the variable.
// Document writes the names into each flag's usage, so that --help prints
// them from the rule rather than from hand-written text.
package flagenv

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Prefix begins every environment name the rule gives.
const Prefix = "NO8S_"

// Flag annotations: a flag's older environment names (Alias), the mark of
// a flag kept off the environment (Local), and that of a flag whose usage
// names its variables already (Document).
const (
	aliasKey      = "no8s/env-alias"
	localKey      = "no8s/env-none"
	documentedKey = "no8s/env-documented"
)

// Name returns the environment variable of the flag named flag: Prefix and
// the name in upper case with '-' as '_' (store-addr: NO8S_STORE_ADDR).
func Name(flag string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Bound reports whether the rule applies to f: every flag but cobra's
// --help and those marked Local.
func Bound(f *pflag.Flag) bool { return f.Name != "help" && f.Annotations[localKey] == nil }

// Local keeps the named flags of fs off the environment: only the command
// line sets them. It is for a command that runs beside processes whose
// variables by the rule mean something else (no8s dev's internal
// --store-addr is not a reconciler's $NO8S_STORE_ADDR). It panics when fs
// has no such flag.
func Local(fs *pflag.FlagSet, names ...string) {
	for _, name := range names {
		if err := fs.SetAnnotation(name, localKey, []string{"true"}); err != nil {
			panic("flagenv.Local: " + err.Error())
		}
	}
}

// Alias records older environment names of the flag name of fs, read after
// the rule's name and logged as deprecated when used. It panics when fs has
// no such flag: a programming error.
func Alias(fs *pflag.FlagSet, name string, old ...string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("flagenv.Alias: no flag --" + name)
	}
	for _, o := range old {
		if o != Name(name) {
			f.Annotations = addAnnotation(f.Annotations, o)
		}
	}
}

func addAnnotation(a map[string][]string, v string) map[string][]string {
	if a == nil {
		a = map[string][]string{}
	}
	a[aliasKey] = append(a[aliasKey], v)
	return a
}

// Aliases returns the older environment names of f, in the order read.
func Aliases(f *pflag.Flag) []string { return f.Annotations[aliasKey] }

// Names returns the environment names f is read from, in order: the rule's
// name, then its aliases; none when f is not Bound.
func Names(f *pflag.Flag) []string {
	if !Bound(f) {
		return nil
	}
	return append([]string{Name(f.Name)}, Aliases(f)...)
}

// Document appends to the usage of every flag of fs its environment names:
// " ($NO8S_STORE_ADDR)", or " ($NO8S_NATS_URL; deprecated: $NATS_URL)".
// Call it after the flags are defined; a flag documented already is left
// alone.
func Document(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if !Bound(f) || f.Annotations[documentedKey] != nil {
			return
		}
		_ = fs.SetAnnotation(f.Name, documentedKey, []string{"true"})
		doc := "$" + Name(f.Name)
		if old := Aliases(f); len(old) > 0 {
			doc += "; deprecated: $" + strings.Join(old, ", $")
		}
		f.Usage += " (" + doc + ")"
	})
}

// Lookup returns the value of f from the environment: the first of its
// names (Names) set to a non-empty value, and that name; "", "" when none
// is.
func Lookup(f *pflag.Flag, getenv func(string) string) (value, name string) {
	for _, n := range Names(f) {
		if v := getenv(n); v != "" {
			return v, n
		}
	}
	return "", ""
}

// Value returns what the flag name of fs would be without a command line:
// its environment value (Lookup), else its default.
func Value(fs *pflag.FlagSet, name string, getenv func(string) string) string {
	f := fs.Lookup(name)
	if f == nil {
		return ""
	}
	if v, _ := Lookup(f, getenv); v != "" {
		return v
	}
	return f.DefValue
}

// Apply sets every flag of fs that the command line did not set from the
// environment (Lookup). Each alias it uses is logged once on log at WARN
// as deprecated. A value a flag refuses is an error naming the variable.
func Apply(fs *pflag.FlagSet, getenv func(string) string, log *slog.Logger) error {
	var err error
	warned := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || !Bound(f) {
			return
		}
		v, n := Lookup(f, getenv)
		if n == "" {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("$%s: %w", n, serr)
			return
		}
		if n != Name(f.Name) && !warned[n] {
			warned[n] = true
			log.Warn("environment variable "+n+" is deprecated: use "+Name(f.Name), "variable", n, "use", Name(f.Name), "flag", "--"+f.Name)
		}
	})
	return err
}

// Help is the rule as --help says it, below a command's description.
const Help = "A flag shown with ($NO8S_SOME_FLAG) is read from that environment variable too: " +
	"the command line wins, then that variable, then an older name shown as deprecated (logged at start), then the default."

// DocumentCommand appends Help to the description of c and documents its
// own flags (Document). Done once: a second call changes nothing.
func DocumentCommand(c *cobra.Command) {
	if !strings.Contains(c.Long, Help) {
		if c.Long == "" {
			c.Long = c.Short
		}
		c.Long += "\n\n" + Help
	}
	Document(c.LocalFlags())
}

// Bind puts cmd and every command under it on the rule: it documents them
// (DocumentCommand) and, before any of them runs, applies the environment
// (Apply) to the flags of the command that runs. It sets cmd's
// PersistentPreRunE; call it once the commands and their flags are
// defined.
func Bind(cmd *cobra.Command, getenv func(string) string, log *slog.Logger) {
	var document func(c *cobra.Command)
	document = func(c *cobra.Command) {
		DocumentCommand(c)
		for _, sub := range c.Commands() {
			document(sub)
		}
	}
	document(cmd)
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		return Apply(c.Flags(), getenv, log)
	}
}
