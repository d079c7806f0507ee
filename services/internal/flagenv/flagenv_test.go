package flagenv_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/no8s/no8s/services/internal/flagenv"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// testFlags is a flag set with a string flag aliased to OLD_ADDR, an int,
// a duration and a flag kept Local.
func testFlags() (*pflag.FlagSet, *string, *int, *time.Duration) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	addr := fs.String("store-addr", "default", "address")
	flagenv.Alias(fs, "store-addr", "OLD_ADDR", "NO8S_STORE_ADDR")
	n := fs.Int("max-conns", 4, "pool size")
	d := fs.Duration("lease", time.Second, "lease")
	fs.String("internal-addr", "x", "kept off the environment")
	flagenv.Local(fs, "internal-addr")
	return fs, addr, n, d
}

func logger(buf *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

func TestName(t *testing.T) {
	for flag, want := range map[string]string{"store-addr": "NO8S_STORE_ADDR", "nats-url": "NO8S_NATS_URL", "lease": "NO8S_LEASE", "max-watches-per-identity": "NO8S_MAX_WATCHES_PER_IDENTITY"} {
		if got := flagenv.Name(flag); got != want {
			t.Errorf("Name(%q) = %q, want %q", flag, got, want)
		}
	}
}

// TestApplyPrecedence: command line > rule's name > alias > default; an
// empty variable is unset.
func TestApplyPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"default", nil, nil, "default"},
		{"empty is unset", nil, map[string]string{"NO8S_STORE_ADDR": "", "OLD_ADDR": ""}, "default"},
		{"alias", nil, map[string]string{"OLD_ADDR": "old"}, "old"},
		{"rule over alias", nil, map[string]string{"NO8S_STORE_ADDR": "new", "OLD_ADDR": "old"}, "new"},
		{"empty rule falls to alias", nil, map[string]string{"NO8S_STORE_ADDR": "", "OLD_ADDR": "old"}, "old"},
		{"command line over both", []string{"--store-addr", "cli"}, map[string]string{"NO8S_STORE_ADDR": "new", "OLD_ADDR": "old"}, "cli"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, addr, _, _ := testFlags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := flagenv.Apply(fs, env(tc.env), logger(&buf)); err != nil {
				t.Fatal(err)
			}
			if *addr != tc.want {
				t.Fatalf("--store-addr = %q, want %q", *addr, tc.want)
			}
		})
	}
}

func TestApplyTypedValuesAndLocal(t *testing.T) {
	fs, _, n, d := testFlags()
	var buf bytes.Buffer
	err := flagenv.Apply(fs, env(map[string]string{"NO8S_MAX_CONNS": "9", "NO8S_LEASE": "7s", "NO8S_INTERNAL_ADDR": "from-env"}), logger(&buf))
	if err != nil {
		t.Fatal(err)
	}
	if *n != 9 || *d != 7*time.Second {
		t.Fatalf("max-conns %d, lease %s", *n, *d)
	}
	if v := fs.Lookup("internal-addr").Value.String(); v != "x" {
		t.Fatalf("a Local flag was set from the environment: %q", v)
	}
}

// TestApplyBadValue: a value the flag refuses is an error naming the
// variable it came from.
func TestApplyBadValue(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"NO8S_MAX_CONNS": {"NO8S_MAX_CONNS": "many"},
		"NO8S_LEASE":     {"NO8S_LEASE": "6"},
	} {
		fs, _, _, _ := testFlags()
		var buf bytes.Buffer
		err := flagenv.Apply(fs, env(vars), logger(&buf))
		if err == nil || !strings.Contains(err.Error(), "$"+name) {
			t.Errorf("%v: error %v, want one naming $%s", vars, err, name)
		}
	}
}

// TestDeprecationLoggedOnce: an alias in use is logged once at WARN,
// naming the variable to use; the rule's name is not logged.
func TestDeprecationLoggedOnce(t *testing.T) {
	fs, _, _, _ := testFlags()
	fs.String("worker-addr", "", "a second flag with the same old name (sorted after store-addr)")
	flagenv.Alias(fs, "worker-addr", "OLD_ADDR")
	var buf bytes.Buffer
	if err := flagenv.Apply(fs, env(map[string]string{"OLD_ADDR": "old", "NO8S_LEASE": "2s"}), logger(&buf)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "OLD_ADDR is deprecated") || !strings.Contains(out, "use NO8S_STORE_ADDR") {
		t.Fatalf("log:\n%s\nwant one WARN that OLD_ADDR is deprecated, naming NO8S_STORE_ADDR", out)
	}

	buf.Reset()
	fs, _, _, _ = testFlags()
	if err := flagenv.Apply(fs, env(map[string]string{"OLD_ADDR": "old", "NO8S_STORE_ADDR": "new"}), logger(&buf)); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("the alias was not used, yet logged:\n%s", buf.String())
	}
}

func TestDocument(t *testing.T) {
	fs, _, _, _ := testFlags()
	flagenv.Document(fs)
	for flag, want := range map[string]string{
		"store-addr":    "address ($NO8S_STORE_ADDR; deprecated: $OLD_ADDR)",
		"max-conns":     "pool size ($NO8S_MAX_CONNS)",
		"internal-addr": "kept off the environment",
	} {
		if got := fs.Lookup(flag).Usage; got != want {
			t.Errorf("--%s usage %q, want %q", flag, got, want)
		}
	}
	if got := flagenv.Value(fs, "store-addr", env(map[string]string{"OLD_ADDR": "old"})); got != "old" {
		t.Errorf("Value = %q, want old", got)
	}
	if got := flagenv.Value(fs, "max-conns", env(nil)); got != "4" {
		t.Errorf("Value = %q, want the default 4", got)
	}
}

// TestBind: the environment reaches the flags of the command that runs,
// the persistent flags of its parent included, after the command line.
func TestBind(t *testing.T) {
	var addr, mode string
	root := &cobra.Command{Use: "d", RunE: func(*cobra.Command, []string) error { return nil }}
	root.PersistentFlags().StringVar(&addr, "store-addr", "default", "address")
	sub := &cobra.Command{Use: "migrate", RunE: func(*cobra.Command, []string) error { return nil }}
	sub.Flags().StringVar(&mode, "mode", "a", "mode")
	root.AddCommand(sub)
	var buf bytes.Buffer
	flagenv.Bind(root, env(map[string]string{"NO8S_STORE_ADDR": "env", "NO8S_MODE": "b"}), logger(&buf))
	root.SetArgs([]string{"migrate", "--store-addr", "cli"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if addr != "cli" || mode != "b" {
		t.Fatalf("store-addr %q mode %q, want cli and b", addr, mode)
	}
	if u := sub.Flags().Lookup("mode").Usage; u != "mode ($NO8S_MODE)" {
		t.Fatalf("subcommand flag usage %q", u)
	}
}
