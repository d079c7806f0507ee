package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/testkit"
	"github.com/no8s/no8s/libs/sdk/worker"
)

// The tests drive a small reconciler, probe, whose behaviour is chosen by
// each resource's spec.mode, and which records every step call.

var widget = sdk.Type("Widget", "v1")

const widgetSchema = `{"type":"object","properties":{"mode":{"type":"string"},"size":{"type":"integer"}}}`

type probeSpec struct {
	Mode  string     `json:"mode"`
	Size  int        `json:"size"`
	Token secret.Ref `json:"token"`
}

type probe struct {
	mu      sync.Mutex
	calls   []string
	forced  map[string]int
	stalled map[string]bool
	started chan string   // receives the resource name when a blocking mode starts
	release chan struct{} // closed to release stall-once
}

func newProbe() *probe {
	return &probe{forced: map[string]int{}, stalled: map[string]bool{}, started: make(chan string, 16), release: make(chan struct{})}
}

func (p *probe) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, s)
}

func (p *probe) callsFor(name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.calls {
		if len(c) > len(name) && c[len(c)-len(name)-1:] == " "+name {
			out = append(out, c[:len(c)-len(name)-1])
		}
	}
	return out
}

func (p *probe) engine(name string) *sdk.Engine[probeSpec] {
	return sdk.New[probeSpec](name, stepA{p}, stepB{p}).WithConditions("A", "B")
}

type stepA struct{ p *probe }

func (stepA) Name() string { return "a" }

func (s stepA) Do(ctx context.Context, req *sdk.Request[probeSpec]) (sdk.Result, error) {
	name := req.Resource.Name
	s.p.record("do-a " + name)
	if req.Force {
		s.p.mu.Lock()
		s.p.forced[name]++
		s.p.mu.Unlock()
	}
	switch req.Spec.Mode {
	case "fail":
		req.MarkFalse("A", "Broken", "boom")
		return sdk.Result{}, errors.New("boom")
	case "terminal":
		return sdk.Result{}, sdk.Terminalf("size %d can never work", req.Spec.Size)
	case "requeue":
		return sdk.RequeueAfter(time.Hour), nil
	case "panic":
		panic("probe panicked")
	case "secret":
		v, err := req.Secret(ctx, req.Spec.Token)
		if err != nil {
			return sdk.Result{}, err
		}
		req.SetOutput("token_length", v.Len())
	case "wait-ctx":
		s.p.started <- name
		<-ctx.Done()
		return sdk.Result{}, ctx.Err()
	case "stall-once":
		s.p.mu.Lock()
		first := !s.p.stalled[name]
		s.p.stalled[name] = true
		s.p.mu.Unlock()
		if first {
			s.p.started <- name
			<-s.p.release // ignores ctx: a stuck attempt
		}
	}
	req.MarkTrue("A", "Done", "")
	req.SetOutput("size", req.Spec.Size)
	req.Changes.Created++
	return sdk.Result{}, nil
}

func (s stepA) Cleanup(_ context.Context, req *sdk.Request[probeSpec]) (sdk.Result, error) {
	s.p.record("cleanup-a " + req.Resource.Name)
	return sdk.Result{}, nil
}

type stepB struct{ p *probe }

func (stepB) Name() string { return "b" }

func (s stepB) Do(_ context.Context, req *sdk.Request[probeSpec]) (sdk.Result, error) {
	s.p.record("do-b " + req.Resource.Name)
	req.MarkTrue("B", "Done", fmt.Sprintf("generation %d", req.Generation()))
	return sdk.Result{}, nil
}

func (s stepB) Cleanup(_ context.Context, req *sdk.Request[probeSpec]) (sdk.Result, error) {
	s.p.record("cleanup-b " + req.Resource.Name)
	return sdk.Result{}, nil
}

func (s stepB) Post(_ context.Context, req *sdk.Request[probeSpec]) error {
	s.p.record("post-b " + req.Resource.Name)
	return nil
}

// settled waits until the reconciler's consumer has no message left
// undelivered or unacknowledged.
func settled(t *testing.T, env *testkit.Env, consumer string) {
	t.Helper()
	js, err := jetstream.New(env.NATS)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := js.Consumer(ctx, worker.DefaultStream, consumer)
		var info *jetstream.ConsumerInfo
		if err == nil {
			info, err = c.Info(ctx)
		}
		cancel()
		if err != nil {
			t.Fatalf("consumer %s: %v", consumer, err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s not settled: %d pending, %d unacknowledged", consumer, info.NumPending, info.NumAckPending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("calls\n got %q\nwant %q", got, want)
	}
}
