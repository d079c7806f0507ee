package worker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

func TestSettle(t *testing.T) {
	lease := 30 * time.Second
	wrap := func(err error) error { return fmt.Errorf("acquire lease: %w", err) }
	for _, tc := range []struct {
		name  string
		in    outcome
		verb  verb
		delay time.Duration
	}{
		{"success", outcome{stage: stageRun, report: wire.Report{Outcome: lifecycle.OutcomeSuccess}}, ack, 0},
		{"requeue-after", outcome{stage: stageRun, report: wire.Report{Outcome: lifecycle.OutcomeRequeue, RequeueAfter: time.Minute}}, ack, 0},
		{"error", outcome{stage: stageRun, report: wire.Report{Outcome: lifecycle.OutcomeError, Err: errors.New("x")}}, ack, 0},
		{"terminal", outcome{stage: stageRun, report: wire.Report{Outcome: lifecycle.OutcomeTerminal, Err: sdk.Terminal(nil)}}, term, 0},
		{"skipped and released", outcome{stage: stageRun, report: wire.Report{Outcome: lifecycle.OutcomeRequeue, Skipped: true}}, ack, 0},
		{"stale epoch on save", outcome{stage: stageRun, report: wire.Report{Outcome: lifecycle.OutcomeSuccess, SaveErr: wrap(wire.ErrStaleEpoch)}}, term, 0},
		{"purged before save", outcome{stage: stageRun, report: wire.Report{Outcome: lifecycle.OutcomeSuccess, SaveErr: wrap(wire.ErrNotFound)}}, term, 0},
		{"save unavailable", outcome{stage: stageRun, deliveries: 1, report: wire.Report{Outcome: lifecycle.OutcomeTerminal, SaveErr: wrap(wire.ErrUnavailable)}}, nak, time.Second},
		{"save unavailable, capped short", outcome{stage: stageRun, deliveries: 10, report: wire.Report{SaveErr: wrap(wire.ErrUnavailable)}}, nak, maxUnavailableDelay},
		{"save unavailable, 4th delivery", outcome{stage: stageRun, deliveries: 4, report: wire.Report{SaveErr: errors.New("eof")}}, nak, 8 * time.Second},
		{"lease held", outcome{stage: stageAcquire, deliveries: 1, err: wrap(wire.ErrLeaseHeld)}, nak, 2 * time.Second},
		{"lease held, capped at the lease", outcome{stage: stageAcquire, deliveries: 10, err: wrap(wire.ErrLeaseHeld)}, nak, lease},
		{"stale dispatch", outcome{stage: stageAcquire, err: wrap(wire.ErrStaleDispatch)}, term, 0},
		{"resource gone", outcome{stage: stageAcquire, err: wrap(wire.ErrNotFound)}, term, 0},
		{"ignored", outcome{stage: stageAcquire, err: wrap(wire.ErrIgnored)}, term, 0},
		{"store unavailable", outcome{stage: stageAcquire, deliveries: 2, err: wrap(wire.ErrUnavailable)}, nak, 2 * time.Second},
		{"store unavailable, capped short", outcome{stage: stageAcquire, deliveries: 50, err: wrap(wire.ErrUnavailable)}, nak, maxUnavailableDelay},
		{"undecodable", outcome{stage: stageDecode, err: errors.New("bad")}, term, 0},
		{"not started at shutdown", outcome{stage: stageNotStarted}, nak, 0},
		{"abandoned at shutdown", outcome{stage: stageAbandoned}, nak, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := settle(tc.in, lease)
			if a.verb != tc.verb || a.delay != tc.delay || a.why == "" {
				t.Fatalf("got %s after %s (%q), want %s after %s", a.verb, a.delay, a.why, tc.verb, tc.delay)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	rec := sdk.New[map[string]any]("widgets")
	for _, tc := range []struct {
		name string
		rec  Reconciler
		cfg  Config
	}{
		{"no reconciler", nil, Config{}},
		{"bad name", sdk.New[map[string]any]("Widgets!"), Config{Types: []sdk.TypeRef{sdk.Type("Widget", "v1")}}},
		{"no types", rec, Config{}},
		{"bad type", rec, Config{Types: []sdk.TypeRef{sdk.Type("widget", "1")}}},
		{"duplicate type", rec, Config{Types: []sdk.TypeRef{sdk.Type("Widget", "v1"), sdk.Type("Widget", "v1")}}},
		{"bad owned type", sdk.New[map[string]any]("widgets").Owns(sdk.Type("gadget", "one")), Config{Types: []sdk.TypeRef{sdk.Type("Widget", "v1")}}},
		{"no connections", rec, Config{Types: []sdk.TypeRef{sdk.Type("Widget", "v1")}}},
	} {
		if _, err := New(tc.rec, tc.cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

func TestOptionValidation(t *testing.T) {
	for name, opt := range map[string]Option{
		"concurrency 0":     WithMaxConcurrency(0),
		"lease 1s":          WithLease(time.Second),
		"lease fractional":  WithLease(4500 * time.Millisecond),
		"negative grace":    WithShutdownGrace(-time.Second, 0),
		"fetch wait 1ms":    WithFetchWait(time.Millisecond),
		"ttl < 2 heartbeat": WithHeartbeat(time.Second, time.Second),
		"max timeout 0":     WithMaxTimeout(0),
		"empty replica":     WithReplicaID(""),
		"empty stream":      WithStream("", true),
		"nil resolver":      WithSecretResolver(nil),
		"nil wrapper":       WithClientWrapper(nil),
	} {
		o := defaults()
		if err := opt(&o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: err %v, want ErrInvalidOption", name, err)
		}
	}
}

func TestDecodeItem(t *testing.T) {
	if _, err := decodeItem([]byte(`{"resourceId":"12","dispatchId":"d1","reason":"REASON_GENERATION"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeItem([]byte(`{}`)); err == nil {
		t.Fatal("an item without resource id was accepted")
	}
	if _, err := decodeItem([]byte{0xff, 0x01}); err == nil {
		t.Fatal("garbage was accepted")
	}
}
