package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/problem"
)

// A write that keeps losing races is retried, with pauses, until the
// request's deadline; then it answers the last conflict, saying how long
// and how many attempts it took. A client that goes away ends it at once.
func TestRaceRetryUntilDeadline(t *testing.T) {
	s := &Service{cfg: Config{RequestTimeout: 300 * time.Millisecond}}
	lost := problem.New(problem.Conflict, problem.CodeConflict, "resource 7 has resource_version 9, not 8")
	start := time.Now()
	r := s.raceRetry(t.Context())
	var err error
	attempts := 1
	for err = r.again(lost); err == nil; err = r.again(lost) {
		attempts++
	}
	took := time.Since(start)
	pe := problem.As(err)
	if pe == nil || pe.Code != problem.CodeConflict || httpStatus(pe.Kind) != http.StatusConflict ||
		!strings.HasPrefix(pe.Detail, lost.Detail+"; other writers kept changing it for ") || !strings.Contains(pe.Detail, " attempts)") {
		t.Fatalf("gave up with %v", err)
	}
	if took > 300*time.Millisecond || took < 100*time.Millisecond || attempts < 5 {
		t.Fatalf("%d attempts in %s, want several within the 300ms deadline", attempts, took)
	}
	if lost.Detail != "resource 7 has resource_version 9, not 8" {
		t.Fatalf("the store's error was changed: %q", lost.Detail)
	}
	t.Logf("%d attempts in %s: %s", attempts, took, pe.Detail)

	// The client's own deadline, when sooner, bounds it too.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	r = s.raceRetry(ctx)
	err = nil
	for err == nil {
		err = r.again(lost)
	}
	if took := time.Since(start); took > 100*time.Millisecond || problem.As(err) == nil && ctx.Err() == nil {
		t.Fatalf("with a 50ms client deadline: %v after %s", err, took)
	}
	// A client gone: no more attempts.
	gone, stop := context.WithCancel(t.Context())
	stop()
	if err := s.raceRetry(gone).again(lost); err == nil {
		t.Fatal("retried for a client that went away")
	}
}
