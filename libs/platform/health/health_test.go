package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/health"
)

func TestProbes(t *testing.T) {
	down := errors.New("connection refused")
	slow := health.Check{Name: "slow", Func: func(ctx context.Context) error {
		<-ctx.Done() // never answers: the timeout decides
		return ctx.Err()
	}}
	cfg := health.Config{
		Ready: []health.Check{
			{Name: "store", Func: func(context.Context) error { return nil }},
			{Name: "nats", Func: func(context.Context) error { return down }},
			slow,
		},
		Info:    func() map[string]any { return map[string]any{"service": "test", "status": "overridden"} },
		Timeout: 100 * time.Millisecond,
	}
	srv := httptest.NewServer(health.Handler(cfg))
	defer srv.Close()
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, doc
	}
	start := time.Now()
	code, doc := get(health.ReadyPath)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("readyz took %v with a 100ms check timeout", took)
	}
	failed, _ := doc["failed"].([]any)
	if code != http.StatusServiceUnavailable || doc["status"] != "unavailable" || doc["service"] != "test" ||
		!slices.Equal(failed, []any{"nats", "slow"}) || doc["errors"].(map[string]any)["nats"] != "connection refused" {
		t.Fatalf("readyz %d %v", code, doc)
	}
	if code, doc := get(health.LivePath); code != http.StatusOK || doc["status"] != "ok" || doc["failed"] != nil {
		t.Fatalf("healthz %d %v", code, doc)
	}
}

func TestRunAllPass(t *testing.T) {
	r := health.Run(t.Context(), 0, []health.Check{{Name: "a", Func: func(context.Context) error { return nil }}})
	if !r.OK() || r.Status != "ok" || r.Detail != "" {
		t.Fatalf("%+v", r)
	}
}

func TestServeOff(t *testing.T) {
	stop, err := health.Serve(t.Context(), health.Off, http.NotFoundHandler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop, err = health.Serve(t.Context(), "127.0.0.1:0", health.Handler(health.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop()
}
