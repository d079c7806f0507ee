package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk/registry"
)

func TestRetryRegistrationWaitsOutPassingFailures(t *testing.T) {
	want := &registry.Registration{}
	calls := 0
	var told []error
	reg, err := retryRegistration(t.Context(), func(context.Context) (*registry.Registration, error) {
		calls++
		if calls < 3 {
			return nil, fmt.Errorf("registry: claim Widget/v1: %w", errors.New("nats: connection closed"))
		}
		return want, nil
	}, func(err error) { told = append(told, err) })
	if err != nil || reg != want || calls != 3 || len(told) != 2 {
		t.Fatalf("reg %p err %v after %d calls, %d failures told; want the registration after 3 calls, 2 told", reg, err, calls, len(told))
	}
}

func TestRetryRegistrationReturnsRefusals(t *testing.T) {
	for _, refusal := range []error{registry.ErrInvalid, registry.ErrTypeTaken} {
		calls := 0
		reg, err := retryRegistration(t.Context(), func(context.Context) (*registry.Registration, error) {
			calls++
			return nil, fmt.Errorf("%w: Widget/v1", refusal)
		}, func(err error) { t.Errorf("a refusal was retried: %v", err) })
		if !errors.Is(err, refusal) || reg != nil || calls != 1 {
			t.Fatalf("%v: reg %p err %v after %d calls; want the refusal at once", refusal, reg, err, calls)
		}
	}
}

func TestRetryRegistrationStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	reg, err := retryRegistration(ctx, func(context.Context) (*registry.Registration, error) {
		return nil, errors.New("nats: timeout")
	}, func(error) {})
	if reg != nil || err != nil {
		t.Fatalf("reg %p err %v once stopped; want neither", reg, err)
	}
}
