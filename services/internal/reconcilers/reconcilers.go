// Package reconcilers reads the registry of live reconcilers: the JetStream
// KV bucket in which every worker replica announces its reconciler and
// claims the types it serves (docs/design/reconcile.md). The workers
// (libs/sdk) write it; the scheduler and the api-gateway read it. The
// bucket's name, key layout and TTL are libs/api/subjects'.
package reconcilers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
)

// TypeRef names a resource type and version.
type TypeRef struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func (t TypeRef) String() string { return t.Name + "/" + t.Version }

// Reconciler is one registered reconciler.
type Reconciler struct {
	Name string `json:"name"`
	// Types are the types it serves.
	Types []TypeRef `json:"types"`
	// Replicas counts its live replicas.
	Replicas int `json:"replicas"`
	// Live is true while a replica heartbeats or it holds a type.
	Live bool `json:"live"`
}

// Registry is the snapshot of the bucket.
type Registry struct {
	// Owners maps each claimed type to the reconciler serving it.
	Owners map[TypeRef]string
	// Reconcilers are every reconciler seen, by name.
	Reconcilers []Reconciler
}

// replicaValue is the value of a replica key. Types are objects
// {name, version}; "Type/version" strings are accepted too.
type replicaValue struct {
	Name  string            `json:"name"`
	Types []json.RawMessage `json:"types"`
}

func parseType(raw json.RawMessage) (TypeRef, bool) {
	var t TypeRef
	if json.Unmarshal(raw, &t) == nil && t.Name != "" {
		return t, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, v, ok := strings.Cut(s, "/"); ok && n != "" && v != "" {
			return TypeRef{Name: n, Version: v}, true
		}
	}
	return TypeRef{}, false
}

// Read returns the current registry. A missing bucket is an empty registry
// (no reconciler has ever started).
func Read(ctx context.Context, js jetstream.KeyValueManager) (*Registry, error) {
	reg := &Registry{Owners: map[TypeRef]string{}}
	kv, err := js.KeyValue(ctx, subjects.RegistryBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return reg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reconciler registry %s: %w", subjects.RegistryBucket, err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read reconciler registry: %w", err)
	}
	defer func() { _ = w.Stop() }()
	byName := map[string]*Reconciler{}
	get := func(name string) *Reconciler {
		r := byName[name]
		if r == nil {
			r = &Reconciler{Name: name, Types: []TypeRef{}}
			byName[name] = r
		}
		return r
	}
	addType := func(r *Reconciler, t TypeRef) {
		if !slices.Contains(r.Types, t) {
			r.Types = append(r.Types, t)
		}
	}
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return nil, fmt.Errorf("read reconciler registry: %w", ctx.Err())
		}
		if e == nil {
			break // every current value has been seen
		}
		key := e.Key()
		if n, v, ok := subjects.ParseTypeKey(key); ok {
			name := string(e.Value())
			if name == "" {
				continue
			}
			t := TypeRef{Name: n, Version: v}
			reg.Owners[t] = name
			r := get(name)
			r.Live = true
			addType(r, t)
			continue
		}
		if subjects.IsReplicaKey(key) {
			var rv replicaValue
			if json.Unmarshal(e.Value(), &rv) != nil || rv.Name == "" {
				continue
			}
			r := get(rv.Name)
			r.Replicas++
			r.Live = true
			for _, raw := range rv.Types {
				if t, ok := parseType(raw); ok {
					addType(r, t)
				}
			}
		}
	}
	for _, r := range byName {
		slices.SortFunc(r.Types, func(a, b TypeRef) int { return strings.Compare(a.String(), b.String()) })
		reg.Reconcilers = append(reg.Reconcilers, *r)
	}
	slices.SortFunc(reg.Reconcilers, func(a, b Reconciler) int { return strings.Compare(a.Name, b.Name) })
	return reg, nil
}

// ReadTimeout bounds one Read in callers that poll.
const ReadTimeout = 5 * time.Second
