// Package reconcilers reads the registry of live reconcilers: the JetStream
// KV bucket in which every worker replica announces its reconciler and
// claims the types it serves (docs/design/reconcile.md). The workers
// (libs/sdk) write it; the scheduler and the api-gateway read it. The
// bucket's name, key layout and TTL are libs/api/subjects'.
package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/registry"
)

// TypeRef names a resource type and version.
type TypeRef = sdk.TypeRef

// Reconciler is one registered reconciler, as GET /api/v1/reconcilers
// lists it (the API's document, libs/client).
type Reconciler = client.Reconciler

// Registry is the snapshot of the bucket.
type Registry struct {
	// Owners maps each claimed type to the reconciler serving it.
	Owners map[TypeRef]string
	// Reconcilers are every reconciler seen, by name.
	Reconcilers []Reconciler
	// Live are the same reconcilers as the registry lists them: their
	// replicas with each one's last heartbeat.
	Live []registry.Reconciler
	// Owns maps each claimed type whose reconciler owns other types (its
	// replicas' Owns and OwnsAny, together) to what it owns.
	Owns map[TypeRef]Owned
}

// Owned is what the reconciler of a type owns.
type Owned struct {
	Types map[TypeRef]bool
	// Any: it owns every type.
	Any bool
}

// Has reports whether t is owned.
func (o Owned) Has(t TypeRef) bool { return o.Any || o.Types[t] }

// Read returns the current registry, as the SDK's registry.Live reads the
// bucket. A missing bucket is an empty registry (no reconciler has ever
// started).
func Read(ctx context.Context, js jetstream.KeyValueManager) (*Registry, error) {
	reg := &Registry{Owners: map[TypeRef]string{}, Owns: map[TypeRef]Owned{}}
	kv, err := js.KeyValue(ctx, subjects.RegistryBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return reg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reconciler registry %s: %w", subjects.RegistryBucket, err)
	}
	live, err := registry.Live(ctx, kv)
	if err != nil {
		return nil, fmt.Errorf("read reconciler registry: %w", err)
	}
	reg.Live = live
	reg.Reconcilers = make([]Reconciler, 0, len(live))
	for _, l := range live {
		r := Reconciler{Name: l.Name, Types: []TypeRef{}, Replicas: len(l.Replicas), Live: true}
		add := func(t TypeRef) {
			if !slices.Contains(r.Types, t) {
				r.Types = append(r.Types, t)
			}
		}
		for _, t := range l.Types {
			reg.Owners[t] = l.Name
			add(t)
		}
		owned := Owned{Types: map[TypeRef]bool{}}
		for _, rep := range l.Replicas {
			for _, t := range rep.Types {
				add(t)
			}
			for _, t := range rep.Owns {
				owned.Types[t] = true
			}
			owned.Any = owned.Any || rep.OwnsAny
		}
		if owned.Any || len(owned.Types) > 0 {
			for _, t := range l.Types {
				reg.Owns[t] = owned
			}
		}
		slices.SortFunc(r.Types, func(a, b TypeRef) int { return strings.Compare(a.String(), b.String()) })
		reg.Reconcilers = append(reg.Reconcilers, r)
	}
	return reg, nil
}

// ReadTimeout bounds one Read in callers that poll.
const ReadTimeout = 5 * time.Second
