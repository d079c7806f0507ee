package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/platform/secret"
)

// ConditionSucceeded is the condition the SDK's Request.RunAction keeps:
// True once the plugin's work for the resource's generation succeeded, False
// with the plugin's reason (Dispatched, InProgress, RateLimited, Failed, ...)
// while it runs or after it failed. Declare it with the engine's
// WithConditions so that Ready waits for it.
const ConditionSucceeded = "ActionSucceeded"

// Plugin runs the work that makes the world match a resource (Apply) and
// undoes it when the resource is deleted (Destroy).
//
// Both are called once per reconcile attempt and must return promptly: they
// start the work or look at it once. Their answer:
//
//   - (Status{Done: true}, nil): the work succeeded;
//   - (Status{RequeueAfter: d}, nil): the work is running (or waiting for a
//     rate limit to reset): call again after d;
//   - (Status, err): the work failed. The scheduler retries the resource
//     with backoff, and the next call starts the work anew; an error
//     wrapped with Terminal is not retried until the spec changes or a
//     manual trigger.
//
// Status.Outputs are saved whatever the answer: they are where a plugin
// keeps its state between calls (Task.Outputs gives them back), and what
// users read at GET .../outputs. A plugin must never put a secret there, in
// an error or in a log line.
type Plugin interface {
	// Name is the name reconcilers ask the Registry for (github_actions).
	// It is also the finalizer that resources handled through the plugin
	// carry from creation until Destroy succeeded.
	Name() string
	// Apply starts or follows the work for t's generation.
	Apply(ctx context.Context, t Task) (Status, error)
	// Destroy starts or follows the teardown of what Apply made.
	Destroy(ctx context.Context, t Task) (Status, error)
}

// Resource identifies the resource a Task is about.
type Resource struct {
	// UID is the resource's unique id: stable for its whole life, never
	// reused.
	UID string
	// Type is "Name/version".
	Type string
	// Name is the resource's name.
	Name string
	// Generation is the spec's generation this attempt reconciles.
	Generation int64
}

// Task is one call of a plugin.
type Task struct {
	// Resource identifies the resource.
	Resource Resource
	// Params is what to apply, as JSON in the plugin's own shape (package
	// github: github.Params).
	Params json.RawMessage
	// Outputs are the resource's outputs as saved by the previous attempt:
	// what the plugin returned in Status.Outputs (do not modify).
	Outputs map[string]any
	// Force asks for the work to be done anew even when this generation's
	// succeeded already (the no8s.io/operation: reconcile annotation).
	Force bool
	// Epoch is the attempt's lease epoch, which grows by one with every
	// attempt on the resource: a plugin that saves the epoch of each call in
	// its outputs knows, seeing a gap, that an attempt in between ended
	// without saving (a killed worker) and may have started work that must
	// be found rather than started twice.
	Epoch int64
	// Now is the attempt's clock.
	Now time.Time
	// Secrets resolves secret references found in Params with the worker's
	// resolver (worker.WithSecretResolver). A plugin's own credentials are
	// its configuration, resolved by its own resolver.
	Secrets secret.Resolver
	// Log carries the attempt's identity.
	Log *slog.Logger
}

// Logger returns t.Log, or a logger that discards when it is nil.
func (t Task) Logger() *slog.Logger {
	if t.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Log
}

// Status is a plugin's answer.
type Status struct {
	// Done: the work succeeded.
	Done bool
	// RequeueAfter is when to call again while the work is not done (at
	// least a second is used).
	RequeueAfter time.Duration
	// Reason is a CamelCase word for the resource's condition (Dispatched,
	// InProgress, RateLimited, Succeeded, Failed, ...).
	Reason string
	// Message says more, for people.
	Message string
	// Outputs are set on the resource's outputs, key by key (a nil value
	// removes the key).
	Outputs map[string]any
}

// TerminalError wraps a failure that retrying cannot fix (a workflow that
// does not exist, a token that is refused, inputs that do not fit).
type TerminalError struct{ Err error }

func (e *TerminalError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *TerminalError) Unwrap() error { return e.Err }

// Terminal wraps err as a TerminalError (nil becomes a generic one).
func Terminal(err error) error {
	if err == nil {
		err = errors.New("terminal error")
	}
	return &TerminalError{Err: err}
}

// Terminalf formats a TerminalError.
func Terminalf(format string, args ...any) error { return Terminal(fmt.Errorf(format, args...)) }

// IsTerminal reports whether err is or wraps a TerminalError.
func IsTerminal(err error) bool {
	var te *TerminalError
	return errors.As(err, &te)
}

// Sentinel errors, matchable with errors.Is.
var (
	// ErrUnknown: no plugin of that name is registered.
	ErrUnknown = errors.New("action: no such plugin")
	// ErrInvalid: a plugin's name is not usable, or two share one.
	ErrInvalid = errors.New("action: invalid plugin")
)

// Registry holds a reconciler's plugins by name. Build it in main and give
// it to the engine (sdk.Engine.WithActions); it does not change afterwards.
type Registry struct {
	plugins map[string]Plugin
}

// NewRegistry registers plugins under their names, which must be valid
// finalizers outside reconciler.no8s.io/ (names.DeclaredFinalizer) and
// distinct.
func NewRegistry(plugins ...Plugin) (*Registry, error) {
	r := &Registry{plugins: map[string]Plugin{}}
	for _, p := range plugins {
		if p == nil {
			return nil, fmt.Errorf("%w: nil plugin", ErrInvalid)
		}
		name := p.Name()
		if fe := names.DeclaredFinalizer("name", name); fe != nil {
			return nil, fmt.Errorf("%w: plugin name %s", ErrInvalid, fe.Message)
		}
		if _, dup := r.plugins[name]; dup {
			return nil, fmt.Errorf("%w: two plugins are called %q", ErrInvalid, name)
		}
		r.plugins[name] = p
	}
	return r, nil
}

// Get returns the plugin called name.
func (r *Registry) Get(name string) (Plugin, error) {
	if r != nil {
		if p, ok := r.plugins[name]; ok {
			return p, nil
		}
	}
	have := r.Names()
	if len(have) == 0 {
		return nil, fmt.Errorf("%w: %q (the reconciler has no action plugin: give the engine a registry with WithActions)", ErrUnknown, name)
	}
	return nil, fmt.Errorf("%w: %q (the reconciler has %s)", ErrUnknown, name, strings.Join(have, ", "))
}

// Names returns the registered plugins' names, sorted: the finalizers the
// reconciler owns beyond its own.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.plugins))
	for n := range r.plugins {
		out = append(out, n)
	}
	sort.Strings(out)
	return slices.Clip(out)
}
