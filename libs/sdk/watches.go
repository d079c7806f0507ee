package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// watch is one Watches (path) or WatchesFunc (fn) declaration.
type watch[S any] struct {
	typ  TypeRef
	path []string // the field path below spec
	fn   func(req *Request[S]) []string
}

// Watches declares that the reconciler depends on the resource of type t
// named by a field of its resources' spec, in the same namespace: path is
// dotted from the document, such as "spec.secretRef.name", and its value a
// name or a list of names (anything else names nothing). When a resource so
// named is created, changes (spec, status, deletion) or goes, the scheduler
// reconciles every resource that names it, as controller-runtime's Watches
// with a mapping does. The names are read from each attempt's spec and
// reported with its result; changes coalesce as Owns' do. Watches panics on
// a path that does not start with "spec." or has an empty segment (a
// mistake in the program, found at its start).
func (e *Engine[S]) Watches(t TypeRef, path string) *Engine[S] {
	segs := strings.Split(path, ".")
	if len(segs) < 2 || segs[0] != "spec" || strings.Contains(path, "..") || strings.HasSuffix(path, ".") {
		panic(fmt.Sprintf("sdk: Watches(%s, %q): the path must be a dotted field path in the spec, such as spec.secretRef.name", t, path))
	}
	e.watches = append(e.watches, watch[S]{typ: t, path: segs[1:]})
	return e
}

// WatchesFunc is Watches with the names (in the resource's namespace)
// computed by f from each attempt's request once its steps ran: for a
// dependency a field path cannot express.
func (e *Engine[S]) WatchesFunc(t TypeRef, f func(req *Request[S]) []string) *Engine[S] {
	if f != nil {
		e.watches = append(e.watches, watch[S]{typ: t, fn: f})
	}
	return e
}

// waitError is the error of WaitFor.
type waitError struct {
	dep    wire.Dependency
	reason string
}

func (e *waitError) Error() string {
	return fmt.Sprintf("waiting for %s %s/%s", e.dep.Type, e.dep.Namespace, e.dep.Name)
}

// defaultWaitReason is the Ready reason of a WaitFor given none.
const defaultWaitReason = "WaitingForDependency"

// WaitFor is the error a step returns to wait for the resource of type t
// called name in the request's namespace ("Failed: wait for an event"):
// the attempt fails (Ready False with reason, status failed;
// wrap it in Degraded for a resource that still serves) and is not
// retried on backoff; the scheduler reconciles the resource again as soon
// as that one is created or changes (spec, status, deletion), or on the
// usual spec change or manual trigger.
//
//	if _, err := req.Client.GetByName(ctx, secretType, req.Namespace(), name); errors.Is(err, sdk.ErrNotFound) {
//		return sdk.Result{}, req.WaitFor(secretType, name, "SecretNotFound")
//	}
func (r *Request[S]) WaitFor(t TypeRef, name, reason string) error {
	if reason == "" {
		reason = defaultWaitReason
	}
	we := &waitError{dep: wire.Dependency{Type: t, Namespace: r.Resource.Namespace, Name: name, Wait: true}, reason: reason}
	r.waits = append(r.waits, we.dep)
	return Terminal(we)
}

// waitOf returns the WaitFor error in err's chain, nil when there is none.
func waitOf(err error) *waitError {
	var we *waitError
	if errors.As(err, &we) {
		return we
	}
	return nil
}

// dependencies are what an attempt reports it depends on: the resources
// its Watches name, and those it waits for when it ends waiting (err is a
// WaitFor's), without repeats and at most wire.MaxDependencies.
func (e *Engine[S]) dependencies(req *Request[S], log *slog.Logger, err error) []wire.Dependency {
	var deps []wire.Dependency
	seen := map[wire.Dependency]int{}
	add := func(d wire.Dependency) {
		if d.Name == "" {
			return
		}
		key := d
		key.Wait = false
		if i, ok := seen[key]; ok {
			deps[i].Wait = deps[i].Wait || d.Wait
			return
		}
		seen[key] = len(deps)
		deps = append(deps, d)
	}
	if waitOf(err) != nil {
		for _, d := range req.waits {
			add(d)
		}
	}
	var spec map[string]any
	decoded := false
	for _, w := range e.watches {
		var names []string
		if w.fn != nil {
			names = w.fn(req)
		} else {
			if !decoded {
				decoded = true
				_ = json.Unmarshal(req.Resource.Spec, &spec) // a spec that is no object names nothing
			}
			names = namesAt(spec, w.path)
		}
		for _, n := range names {
			add(wire.Dependency{Type: w.typ, Namespace: req.Resource.Namespace, Name: n})
		}
	}
	if len(deps) > wire.MaxDependencies {
		log.Warn("the attempt depends on more resources than are kept; the rest are not watched",
			"dependencies", len(deps), "kept", wire.MaxDependencies)
		deps = deps[:wire.MaxDependencies]
	}
	return deps
}

// namesAt returns the name, or the names, found at path in doc.
func namesAt(doc map[string]any, path []string) []string {
	var v any = doc
	for _, seg := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[seg]
	}
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
