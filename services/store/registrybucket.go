package store

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/sdk/registry"
)

// registryCheck is how often the store makes sure the reconciler
// registry's bucket exists (besides at once after a reconnect).
const registryCheck = 2 * time.Second

// keepRegistryBucket keeps the reconciler registry's bucket in place until
// ctx ends. The bucket is in memory: a broker restart loses it, and where
// NATS checks identities the reconcilers registering in it may not create
// it (their heartbeats wait for it), so the store recreates it as soon as
// it reconnects, and looks every registryCheck.
func (s *Service) keepRegistryBucket(ctx context.Context) {
	reconnected := s.nc.StatusChanged(nats.CONNECTED)
	defer s.nc.RemoveStatusListener(reconnected)
	t := time.NewTicker(registryCheck)
	defer t.Stop()
	var failing bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-reconnected:
		case <-t.C:
		}
		if !s.nc.IsConnected() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, registryCheck)
		_, err := registry.Ensure(cctx, s.js, subjects.RegistryTTL)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			s.log.Warn("reconciler registry bucket not ensured; retrying", "error", err)
		case err == nil && failing:
			s.log.Info("reconciler registry bucket in place again")
		}
		failing = err != nil
	}
}
