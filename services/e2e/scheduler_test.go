package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestSchedulerFailoverProcesses: scheduler processes elect one leader;
// kill -9 of the leader hands the lease to the standby within lease +
// renew, with a new epoch; a SIGTERM releases the lease at once.
func TestSchedulerFailoverProcesses(t *testing.T) {
	c := newCluster(t)
	c.startStore("")
	leader := func() (holder string, epoch int64, live bool) {
		t.Helper()
		err := c.pool.QueryRow(t.Context(), `SELECT holder, epoch, coalesce(lease_expires_at > now(), false) FROM scheduler_state`).
			Scan(&holder, &epoch, &live)
		if err != nil {
			t.Fatal(err)
		}
		return holder, epoch, live
	}
	holding := func(want string) func() error {
		return func() error {
			if h, _, live := leader(); h != want || !live {
				return fmt.Errorf("leader %q (live %v), want %q", h, live, want)
			}
			return nil
		}
	}
	a := c.startScheduler(c.storeAddrs[0], "sched-a", 2*time.Second)
	waitFor(t, 10*time.Second, "sched-a leads", holding("sched-a"))
	b := c.startScheduler(c.storeAddrs[0], "sched-b", 2*time.Second)
	_, epochA, _ := leader()

	a.kill9()
	killed := time.Now()
	waitFor(t, 10*time.Second, "sched-b takes over", holding("sched-b"))
	if took := time.Since(killed); took > 4*time.Second {
		t.Fatalf("takeover took %v with a 2s lease", took)
	}
	if _, epochB, _ := leader(); epochB <= epochA {
		t.Fatalf("epoch %d after %d", epochB, epochA)
	}
	// A graceful stop releases the lease.
	b.stop(syscall.SIGTERM, 10*time.Second)
	if h, _, live := leader(); h != "sched-b" || live {
		t.Fatalf("after SIGTERM: leader %q, lease live %v", h, live)
	}
}
