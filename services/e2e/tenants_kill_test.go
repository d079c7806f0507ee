package e2e

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/tenancy"
)

// insertRows inserts rows t0000..t<n-1>, active.
func insertRows(ds *datasourceDB, n int) []string {
	var values []string
	var names []string
	for i := range n {
		uid := fmt.Sprintf("t%04d", i)
		values = append(values, fmt.Sprintf("('%s', 'https://%s.example.com', '1')", uid, uid))
		names = append(names, tenancy.TenantName(uid, "web"))
	}
	for chunk := range slices.Chunk(values, 500) {
		ds.exec("INSERT INTO tenants (id, url, active) VALUES " + strings.Join(chunk, ", "))
	}
	return names
}

// syncLeader is the current registry-sync leader's holder name.
func (c *tenantCluster) syncLeader() string {
	var holder string
	if err := c.pool.QueryRow(c.t.Context(), `SELECT holder FROM leader_leases WHERE name = 'registry-sync' AND lease_expires_at > now()`).Scan(&holder); err != nil {
		return ""
	}
	return holder
}

// TestRegistrySyncKill9: registry-sync is killed (-9) at three points while
// 20–80% of 1,000 Tenants exist; each time a standby takes over. Afterwards
// the Tenant set is exactly right: no orphans, no wrong deletes, and every
// Tenant that existed keeps its uid (none was deleted and made again).
func TestRegistrySyncKill9(t *testing.T) {
	c := newTenantCluster(t)
	ds := newMariaDB(t)
	want := insertRows(ds, 1000)
	procs := map[string]*proc{}
	next := 0
	startReplica := func() {
		name := fmt.Sprintf("r%d", next)
		next++
		procs["registry-sync/"+name] = c.startSync(name, "--writes", "2")
	}
	startReplica()
	c.waitSyncLeads()
	startReplica()
	c.create(registryBody("bulk", ds.source()))
	c.create(templateBody("web", "bulk"))

	seen := map[string]string{}
	remember := func() {
		for n, u := range c.tenants() {
			if was, ok := seen[n]; ok && was != u {
				t.Fatalf("Tenant %s was made again: uid %s, was %s", n, u, was)
			}
			seen[n] = u
		}
	}
	for i, frac := range []float64{0.25, 0.5, 0.75} {
		var have int
		waitFor(t, 180*time.Second, fmt.Sprintf("%.0f%% of the Tenants", frac*100), func() error {
			if have = len(c.tenants()); have < int(frac*1000) {
				return fmt.Errorf("%d Tenants", have)
			}
			return nil
		})
		holder := c.syncLeader()
		p := procs[holder]
		if p == nil {
			t.Fatalf("no process for leader %q", holder)
		}
		p.kill9()
		delete(procs, holder)
		remember()
		t.Logf("kill -9 #%d of %s with %d of 1000 Tenants (%d%%)", i+1, holder, have, have/10)
		if have < 200 || have > 800 {
			t.Fatalf("kill #%d at %d Tenants, outside 20–80%%", i+1, have)
		}
		startReplica()
	}
	got := c.waitTenants(240*time.Second, want...)
	for n, u := range seen {
		if got[n] != u {
			t.Fatalf("Tenant %s: uid %q, was %q", n, got[n], u)
		}
	}
	t.Logf("after 3 kills: exactly the 1000 desired Tenants; the %d seen before a kill kept their uids", len(seen))
}

// TestRegistrySyncPausedLeaderWritesNothing: the leader is stopped (SIGSTOP)
// in the middle of creating 1,000 Tenants, past its lease; a standby takes
// over and finishes; then 300 rows are deactivated (the stopped leader's
// view still has them) and the new leader deletes their Tenants. Resumed
// (SIGCONT), the old leader writes nothing: the set stays exactly the 700,
// and no Tenant is created after it resumed.
func TestRegistrySyncPausedLeaderWritesNothing(t *testing.T) {
	mostlyWaits(t)
	c := newTenantCluster(t)
	ds := newMariaDB(t)
	insertRows(ds, 1000)
	a := c.startSync("a", "--writes", "2")
	c.waitSyncLeads()
	c.startSync("b", "--writes", "4")
	c.create(registryBody("bulk", ds.source()))
	c.create(templateBody("web", "bulk"))
	waitFor(t, 180*time.Second, "300 Tenants", func() error {
		if n := len(c.tenants()); n < 300 {
			return fmt.Errorf("%d Tenants", n)
		}
		return nil
	})
	if h := c.syncLeader(); h != "registry-sync/a" {
		t.Fatalf("leader %q, want registry-sync/a", h)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := len(c.tenants())
	waitFor(t, 30*time.Second, "b takes over", func() error {
		if h := c.syncLeader(); h != "registry-sync/b" {
			return fmt.Errorf("leader %q", h)
		}
		return nil
	})
	ds.exec("UPDATE tenants SET active = '0' WHERE id >= 't0700'")
	var want []string
	for i := range 700 {
		want = append(want, tenancy.TenantName(fmt.Sprintf("t%04d", i), "web"))
	}
	before := c.waitTenants(240*time.Second, want...)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var resumed time.Time
	if err := c.pool.QueryRow(t.Context(), `SELECT now()`).Scan(&resumed); err != nil {
		t.Fatal(err)
	}
	t.Logf("a stopped at %d Tenants; b finished; a resumed", stoppedAt)
	// For 6 s (three of a's lease lengths) the set must not move.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got := c.tenants(); !maps.Equal(got, before) {
			t.Fatalf("the Tenants changed after the stopped leader resumed: %d, want 700", len(got))
		}
	}
	if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'Tenant' AND created_at > $1`, resumed); n != 0 {
		t.Fatalf("%d Tenants created after the stopped leader resumed", n)
	}
	select {
	case <-a.done:
		t.Fatalf("the resumed replica exited: %v", a.err)
	default:
	}
	logs, _ := os.ReadFile(a.log.Name())
	for line := range strings.Lines(string(logs)) {
		if strings.Contains(line, "leadership lost") || strings.Contains(line, "stale") || strings.Contains(line, "deposed") {
			t.Logf("a: %s", strings.TrimSpace(line))
		}
	}
}
