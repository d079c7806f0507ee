package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The "webhook" scenario (issue 5): the latency one admission webhook adds to
// an API create, as the p99 of creates with one local no-op webhook minus the
// p99 with none. Store, admission and gateway are separate processes; the
// webhook is an HTTP server in this process on loopback, as a sidecar would
// be. The webhook intercepts DatabaseCluster/v1 only; the load alternates
// creates of v1 (through the webhook) and v2 (no webhook, same schema and
// body), so that both sides are measured at the same moments, under the same
// load and the same disturbances of the machine.
const (
	webhookTarget      = 2 * time.Millisecond
	webhookWarmup      = time.Second
	webhookMeasure     = 10 * time.Second
	webhookPropagation = 5 * time.Second
)

// webhookConcurrencies are the loads measured; the target is judged at the
// first (one client: the latency the webhook adds, free of queueing).
var webhookConcurrencies = []int{1, 8}

func benchWebhook(ctx context.Context, env *benchEnv) error {
	if err := env.Fresh(ctx); err != nil {
		return err
	}
	for _, v := range []string{"v1", "v2"} {
		if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{
			"name": "DatabaseCluster", "version": v, "description": "Managed database cluster", "schema": json.RawMessage(databaseClusterSchema),
		}); err != nil {
			return err
		}
	}
	var calls atomic.Int64
	hook, err := startNoopWebhook(&calls)
	if err != nil {
		return err
	}
	defer hook.Close()
	fmt.Printf("stack: %s; no-op validating webhook in this process on %s\n", describeServices(env), hook.url)
	if _, err := registerNoopWebhook(ctx, env, hook.url); err != nil {
		return err
	}
	// Wait until admission has the webhook in force: v1 creates reach it.
	deadline := time.Now().Add(webhookPropagation)
	for n := 0; ; n++ {
		before := calls.Load()
		if err := apiCreate(ctx, env, "v1", fmt.Sprintf("wh-probe-%05d", n)); err != nil {
			return err
		}
		if calls.Load() > before {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhook registration did not take effect within %s", webhookPropagation)
		}
	}

	type sides struct {
		mu         sync.Mutex
		hook, none []time.Duration
	}
	results := map[int]*sides{}
	var cpuLines []string
	var disturbed float64
	for _, c := range webhookConcurrencies {
		s := &sides{}
		results[c] = s
		measureFrom := time.Now().Add(webhookWarmup)
		cpu0 := env.sampleCPU()
		callsBefore := calls.Load()
		_, err := runLoad(ctx, loadSpec{Concurrency: c, Warmup: webhookWarmup, Duration: webhookMeasure}, true, func(ctx context.Context, seq int64) error {
			withHook := seq%2 == 0
			version := "v2"
			if withHook {
				version = "v1"
			}
			t0 := time.Now()
			if err := apiCreate(ctx, env, version, fmt.Sprintf("wh-c%d-%07d", c, seq)); err != nil {
				return err
			}
			d := time.Since(t0)
			if t0.Before(measureFrom) {
				return nil
			}
			s.mu.Lock()
			if withHook {
				s.hook = append(s.hook, d)
			} else {
				s.none = append(s.none, d)
			}
			s.mu.Unlock()
			return nil
		})
		if err != nil {
			return fmt.Errorf("creates at c=%d: %w", c, err)
		}
		cpu1 := env.sampleCPU()
		disturbed = max(disturbed, cpu1.other(cpu0))
		cpuLines = append(cpuLines, fmt.Sprintf("c=%d\t%s", c, cpu1.cores(cpu0)))
		// Every v1 create, warm-up included, went through the webhook.
		if got, measured := calls.Load()-callsBefore, int64(len(s.hook)); got < measured {
			return fmt.Errorf("the webhook saw %d calls for %d measured creates", got, measured)
		}
	}

	fmt.Printf("\nAPI creates for %s after %s warm-up, alternating v1 (webhook) and v2 (none)\n", webhookMeasure, webhookWarmup)
	tw := newTable()
	fmt.Fprintf(tw, "  conc\tside\tn\tp50\tp99\t\n")
	for _, c := range webhookConcurrencies {
		s := results[c]
		fmt.Fprintf(tw, "  %d\tno webhook\t%d\t%s\t%s\t\n", c, len(s.none), fmtDur(percentile(s.none, 50)), fmtDur(percentile(s.none, 99)))
		fmt.Fprintf(tw, "  %d\tone no-op webhook\t%d\t%s\t%s\t\n", c, len(s.hook), fmtDur(percentile(s.hook, 50)), fmtDur(percentile(s.hook, 99)))
		fmt.Fprintf(tw, "  %d\tadded by the webhook\t\t%s\t%s\t\n", c,
			fmtSigned(percentile(s.hook, 50)-percentile(s.none, 50)), fmtSigned(percentile(s.hook, 99)-percentile(s.none, 99)))
		env.figure(fmt.Sprintf("webhook create p50 at c=%d, ms", c), ms(percentile(s.hook, 50)))
		env.figure(fmt.Sprintf("webhook create p99 at c=%d, ms", c), ms(percentile(s.hook, 99)))
	}
	tw.Flush()
	fmt.Println("CPU used while measuring, in cores (warm-up included):")
	tw = newTable()
	for _, l := range cpuLines {
		fmt.Fprintf(tw, "  %s\n", l)
	}
	tw.Flush()
	if disturbed > 0.3 {
		fmt.Printf("note: other processes took up to %.2f cores while measuring: the figures are disturbed\n", disturbed)
	}

	c := webhookConcurrencies[0]
	added := percentile(results[c].hook, 99) - percentile(results[c].none, 99)
	printTargets(targetResult{
		name:   fmt.Sprintf("p99 added by one no-op webhook, c=%d", c),
		ok:     added < webhookTarget,
		detail: fmt.Sprintf("%s (target < %s)", fmtSigned(added), fmtDur(webhookTarget)),
	})
	return nil
}

func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}

// registerNoopWebhook registers the no-op webhook for DatabaseCluster/v1
// creates and returns its id.
func registerNoopWebhook(ctx context.Context, env *benchEnv, url string) (int64, error) {
	body, err := env.postJSON(ctx, "/api/v1/admission-webhooks", map[string]any{
		"name": "noop.bench.example.com", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1", "webhook_url": url,
		"webhook_type": "validating", "operations": []string{"CREATE"}, "timeout_seconds": 5,
	})
	if err != nil {
		return 0, err
	}
	var w struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(body, &w); err != nil || w.ID == 0 {
		return 0, fmt.Errorf("register webhook: %s: %v", truncateBytes(body, 300), err)
	}
	return w.ID, nil
}

// noopWebhook is a local webhook that allows everything.
type noopWebhook struct {
	url string
	srv *http.Server
}

func startNoopWebhook(calls *atomic.Int64) (*noopWebhook, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	allowed := []byte(`{"allowed":true}`)
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				UID string `json:"uid"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(allowed)
		}),
	}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("webhook server:", err)
		}
	}()
	return &noopWebhook{url: "http://" + lis.Addr().String() + "/admit", srv: srv}, nil
}

func (h *noopWebhook) Close() { _ = h.srv.Close() }
