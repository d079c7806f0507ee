package composerun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// supervisor runs one service's process: it waits for the depends_on
// conditions, starts the process, runs its health check and restarts it as
// its restart policy says.
type supervisor struct {
	r    *Run
	plan *plan

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	cmd      *exec.Cmd
	started  int
	healthy  bool
	exited   bool
	exitCode int
	lastErr  error
	lastHC   string
	stopping bool
	// failed is set when the service can never start (a dependency that
	// will never hold, a command that cannot be resolved): whatever waits
	// for it fails at once instead of at the start timeout.
	failed error
}

func newSupervisor(r *Run, p *plan) *supervisor {
	return &supervisor{r: r, plan: p, changed: make(chan struct{})}
}

func (s *supervisor) update(fn func()) {
	s.mu.Lock()
	fn()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// ready reports whether the process runs and, when it has a health
// check, passes it: what a VIP forwards to.
func (s *supervisor) ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	if h := s.plan.svc.Healthcheck; h != nil && !h.Disable {
		return s.healthy
	}
	return true
}

func (s *supervisor) startCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// reached reports whether the condition holds, and an error when it never
// will (a one-shot service that failed, a service that stopped for good).
func (s *supervisor) reached(cond string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return false, fmt.Errorf("%s never starts: %w", s.plan.svc.Name, s.failed)
	}
	switch cond {
	case ConditionStarted:
		return s.started > 0, nil
	case ConditionHealthy:
		if s.healthy {
			return true, nil
		}
	case ConditionCompleted:
		if s.exited && s.exitCode == 0 && s.cmd == nil {
			return true, nil
		}
	}
	if s.exited && s.cmd == nil && !restarts(s.plan.svc.Restart, s.exitCode) {
		return false, fmt.Errorf("%s exited with code %d and is not restarted (restart %q): %v", s.plan.svc.Name, s.exitCode, s.plan.svc.Restart, s.lastErr)
	}
	return false, nil
}

// wait waits until cond holds or the deadline passes.
func (s *supervisor) wait(ctx context.Context, cond string, deadline time.Time) error {
	for {
		ok, err := s.reached(cond)
		if ok {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w\n%s log:\n%s", err, s.plan.svc.Name, s.r.LogTail(s.plan.svc.Name, 20))
		}
		s.mu.Lock()
		ch, hc := s.changed, s.lastHC
		s.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%s not %s within the start timeout; last health check: %s\n%s log:\n%s",
				s.plan.svc.Name, cond, hc, s.plan.svc.Name, s.r.LogTail(s.plan.svc.Name, 20))
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// run waits for the dependencies, then runs the process until the run
// stops or the restart policy lets it end.
func (s *supervisor) run() {
	ctx := s.r.ctx
	name := s.plan.svc.Name
	for dep, d := range s.plan.svc.DependsOn {
		if err := s.r.procs[dep].wait(ctx, d.Condition, time.Now().Add(s.r.cfg.StartTimeout)); err != nil {
			s.update(func() {
				s.exited, s.exitCode, s.lastErr = true, -1, fmt.Errorf("depends on %s (%s): %w", dep, d.Condition, err)
				s.failed = s.lastErr
			})
			return
		}
	}
	argv, env, uid, gid, err := s.r.resolve(ctx, s.plan)
	if err != nil {
		s.update(func() { s.exited, s.exitCode, s.lastErr, s.failed = true, -1, err, err })
		return
	}
	if s.plan.svc.Healthcheck != nil && !s.plan.svc.Healthcheck.Disable {
		go s.health(ctx)
	}
	logDir := filepath.Join(s.r.Dir, "logs")
	_ = os.MkdirAll(logDir, 0o755)
	for {
		logf, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			s.update(func() { s.exited, s.exitCode, s.lastErr = true, -1, err })
			return
		}
		cmd := s.r.command(context.WithoutCancel(ctx), name, uid, gid, env, argv...)
		cmd.Stdout, cmd.Stderr = logf, logf
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			logf.Close()
			return
		}
		err = cmd.Start()
		if err != nil {
			logf.Close()
			s.update(func() { s.exited, s.exitCode, s.lastErr = true, -1, err })
			return
		}
		s.update(func() { s.cmd, s.started, s.exited = cmd, s.started+1, false })
		err = cmd.Wait()
		logf.Close()
		code := cmd.ProcessState.ExitCode()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything it left in its group
		s.update(func() { s.cmd, s.exited, s.exitCode, s.lastErr, s.healthy = nil, true, code, err, false })
		s.mu.Lock()
		stopping = s.stopping
		s.mu.Unlock()
		if stopping || !restarts(s.plan.svc.Restart, code) {
			return
		}
		s.r.logf("%s exited (%v); restarting (restart %s)", name, err, s.plan.svc.Restart)
		t := time.NewTimer(time.Second)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// health runs the health check every interval while the run lasts; the
// service is healthy from a passing check until a check fails retries
// times in a row or the process exits.
func (s *supervisor) health(ctx context.Context) {
	h := s.plan.svc.Healthcheck
	interval := parseDuration(h.Interval, 30*time.Second)
	timeout := parseDuration(h.Timeout, 30*time.Second)
	retries := h.Retries
	if retries == 0 {
		retries = 3
	}
	check := func(ctx context.Context) error { return s.r.httpCheck(ctx, s.plan.svc.Name, h.HTTPGet) }
	if h.HTTPGet == nil {
		argv, env, uid, gid, err := s.r.healthArgv(s.plan)
		if err != nil {
			s.update(func() { s.lastHC = err.Error() })
			return
		}
		check = func(ctx context.Context) error {
			_, err := s.r.runOnce(ctx, s.plan.svc.Name, uid, gid, env, argv...)
			return err
		}
	}
	fails := 0
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.mu.Lock()
		running := s.cmd != nil
		s.mu.Unlock()
		if running {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			err := check(cctx)
			cancel()
			s.update(func() {
				if err == nil {
					s.healthy, s.lastHC, fails = s.cmd != nil, "passed", 0
					return
				}
				s.lastHC = err.Error()
				if fails++; fails >= retries {
					s.healthy = false
				}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func parseDuration(s string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return def
}

func (s *supervisor) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return fmt.Errorf("%s is not running", s.plan.svc.Name)
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (s *supervisor) stop(grace time.Duration) {
	s.mu.Lock()
	s.stopping = true
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	for {
		s.mu.Lock()
		done, ch := s.cmd == nil, s.changed
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return
		}
	}
}
