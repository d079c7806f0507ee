// Package noop is the noop reconciler: every resource of the types it serves
// becomes ready (condition Ready=True) at once, and its cleanup does nothing.
// It exists for demos, tests and benchmarks: it lets resources of any type be
// created (the live-reconciler rule) and go through the whole lifecycle
// (pending → reconciling → ready, deleting → gone) with the real scheduler and
// worker runtime in the loop.
package noop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/registry"
)

// DefaultName is the reconciler's default registered name; its finalizer is
// reconciler.no8s.io/noop.
const DefaultName = "noop"

// New returns the noop reconciler registered as name (DefaultName when
// empty). Two noop processes serving different types must use different
// names: one reconciler's replicas share one consumer and one set of types.
func New(name string) *sdk.Engine[json.RawMessage] {
	if name == "" {
		name = DefaultName
	}
	return sdk.New(name, sdk.Func[json.RawMessage](func(context.Context, *sdk.Request[json.RawMessage]) (sdk.Result, error) {
		// Nothing to do while the resource lives nor when it is deleted:
		// with no other condition, the engine derives Ready=True.
		return sdk.Result{}, nil
	}))
}

// NewWithWork is New with simulated work: work runs in every attempt of a
// live resource before it is marked ready (for tests and benchmarks that
// need slow or stalling attempts).
func NewWithWork(name string, work func(ctx context.Context)) *sdk.Engine[json.RawMessage] {
	if name == "" {
		name = DefaultName
	}
	return sdk.New(name, sdk.Func[json.RawMessage](func(ctx context.Context, req *sdk.Request[json.RawMessage]) (sdk.Result, error) {
		if !req.Deleting() {
			work(ctx)
		}
		return sdk.Result{}, nil
	}))
}

// ParseTypes parses a comma-separated list of Type/version, such as
// "DatabaseCluster/v1,Widget/v1".
func ParseTypes(list string) ([]sdk.TypeRef, error) {
	var out []sdk.TypeRef
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, version, ok := strings.Cut(item, "/")
		if !ok {
			return nil, fmt.Errorf("type %q: want Type/version, such as DatabaseCluster/v1", item)
		}
		t := sdk.Type(name, version)
		if err := registry.ValidType(t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no type given: name the types to serve, such as --types DatabaseCluster/v1,Widget/v1")
	}
	return out, nil
}
