package proc_test

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/proc"
)

// TestHealthAddr: healthcheck probes the address the process listens on,
// read as its flag is: the rule's variable, then an alias, then the flag's
// default, then the binary's fallback.
func TestHealthAddr(t *testing.T) {
	cmd := &cobra.Command{Use: "d"}
	cmd.PersistentFlags().String("listen", ":8000", "listen address")
	flagenv.Alias(cmd.PersistentFlags(), "listen", "OLD_LISTEN")
	cmd.Flags().String("health-listen", "", "probes")
	for _, tc := range []struct {
		flag string
		env  map[string]string
		want string
	}{
		{"listen", nil, ":8000"},
		{"listen", map[string]string{"OLD_LISTEN": ":9"}, ":9"},
		{"listen", map[string]string{"OLD_LISTEN": ":9", "NO8S_LISTEN": ":10"}, ":10"},
		{"health-listen", nil, ":8081"},
		{"health-listen", map[string]string{"NO8S_HEALTH_LISTEN": "0.0.0.0:7"}, "0.0.0.0:7"},
	} {
		if got := proc.HealthAddr(cmd, tc.flag, ":8081", func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("--%s with %v: %q, want %q", tc.flag, tc.env, got, tc.want)
		}
	}
}
