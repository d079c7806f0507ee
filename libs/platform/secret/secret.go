package secret

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Reference kinds that Local resolves.
const (
	KindEnv  = "env"
	KindFile = "file"
)

// Sentinel errors, matchable with errors.Is. Every error a Resolver returns
// for a reference wraps one of them and names the reference.
var (
	// ErrInvalidRef: the JSON is not an object with exactly one string member.
	ErrInvalidRef = errors.New("secret: invalid reference")
	// ErrUnsupported: no resolver handles the reference's kind.
	ErrUnsupported = errors.New("secret: unsupported reference kind")
	// ErrNotFound: the variable is unset or the file does not exist.
	ErrNotFound = errors.New("secret: not found")
	// ErrForbidden: the reference is outside what the resolver may read.
	ErrForbidden = errors.New("secret: reference not allowed")
)

// Ref is a secret reference: one kind (env, file, or a kind a custom
// resolver understands) and its argument. In JSON it is an object with
// exactly one string member: {"env": "NAME"} or {"file": "/path"}.
type Ref struct {
	Kind  string
	Value string
}

// Env returns a reference to the environment variable name.
func Env(name string) Ref { return Ref{Kind: KindEnv, Value: name} }

// File returns a reference to the file at path.
func File(path string) Ref { return Ref{Kind: KindFile, Value: path} }

// IsZero reports whether r is the zero reference (absent from the spec).
func (r Ref) IsZero() bool { return r.Kind == "" && r.Value == "" }

// String describes the reference, never the value: `env "NAME"`.
func (r Ref) String() string { return fmt.Sprintf("%s %q", r.Kind, r.Value) }

// MarshalJSON writes {"<kind>": "<value>"}.
func (r Ref) MarshalJSON() ([]byte, error) {
	if r.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(map[string]string{r.Kind: r.Value})
}

// UnmarshalJSON reads {"<kind>": "<value>"}; null leaves the zero Ref.
func (r *Ref) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*r = Ref{}
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%w: want an object like {\"env\": \"NAME\"} or {\"file\": \"/path\"}", ErrInvalidRef)
	}
	if len(m) != 1 {
		kinds := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		return fmt.Errorf("%w: want exactly one of env or file, got %d members %v", ErrInvalidRef, len(m), kinds)
	}
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err != nil || s == "" {
			return fmt.Errorf("%w: %q must be a non-empty string", ErrInvalidRef, k)
		}
		*r = Ref{Kind: k, Value: s}
	}
	return nil
}

// Value is a resolved secret. Its printing methods redact it.
type Value struct{ b []byte }

// NewValue wraps b (for resolvers).
func NewValue(b []byte) Value { return Value{b: slices.Clone(b)} }

// Reveal returns the secret as a string.
func (v Value) Reveal() string { return string(v.b) }

// Bytes returns a copy of the secret.
func (v Value) Bytes() []byte { return slices.Clone(v.b) }

// Len is the secret's length in bytes.
func (v Value) Len() int { return len(v.b) }

// String returns "[redacted]".
func (v Value) String() string { return "[redacted]" }

// GoString returns "[redacted]".
func (v Value) GoString() string { return "[redacted]" }

// Format prints "[redacted]" for every verb.
func (v Value) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[redacted]")) }

// LogValue redacts the value in slog output.
func (v Value) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// MarshalJSON writes "[redacted]".
func (v Value) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// Resolver resolves references. Implementations return an error wrapping
// ErrUnsupported for kinds they do not handle, so that Chain can try the
// next one, and otherwise errors that name the reference but never contain
// the value.
type Resolver interface {
	Resolve(ctx context.Context, ref Ref) (Value, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, ref Ref) (Value, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context, ref Ref) (Value, error) { return f(ctx, ref) }

// Chain tries each resolver in turn and returns the first answer that is not
// ErrUnsupported.
func Chain(resolvers ...Resolver) Resolver {
	return ResolverFunc(func(ctx context.Context, ref Ref) (Value, error) {
		for _, r := range resolvers {
			v, err := r.Resolve(ctx, ref)
			if errors.Is(err, ErrUnsupported) {
				continue
			}
			return v, err
		}
		return Value{}, fmt.Errorf("secret reference %s: %w", ref, ErrUnsupported)
	})
}

// Local resolves {"env": NAME} from the process environment and
// {"file": PATH} from the file system. The zero Local reads any variable and
// any absolute path; set EnvPrefix and FileDir to confine what a spec can
// name (recommended: a spec is written by API users, the environment and
// files belong to the worker).
type Local struct {
	// EnvPrefix, when set, is required of every variable name.
	EnvPrefix string
	// FileDir, when set, must contain every file (after resolving symbolic
	// links).
	FileDir string
	// KeepNewline keeps a file's trailing newline, which is otherwise
	// trimmed (one "\n" or "\r\n").
	KeepNewline bool
	// LookupEnv replaces os.LookupEnv (for tests).
	LookupEnv func(string) (string, bool)
}

// Resolve implements Resolver.
func (l Local) Resolve(_ context.Context, ref Ref) (Value, error) {
	switch ref.Kind {
	case KindEnv:
		return l.env(ref)
	case KindFile:
		return l.file(ref)
	}
	return Value{}, fmt.Errorf("secret reference %s: %w (local resolver reads env and file)", ref, ErrUnsupported)
}

func (l Local) env(ref Ref) (Value, error) {
	if !strings.HasPrefix(ref.Value, l.EnvPrefix) {
		return Value{}, fmt.Errorf("secret reference %s: %w: variable names must start with %q", ref, ErrForbidden, l.EnvPrefix)
	}
	lookup := l.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(ref.Value)
	if !ok {
		return Value{}, fmt.Errorf("secret reference %s: %w: environment variable %s is not set in the worker", ref, ErrNotFound, ref.Value)
	}
	return NewValue([]byte(v)), nil
}

func (l Local) file(ref Ref) (Value, error) {
	p := ref.Value
	if !filepath.IsAbs(p) {
		return Value{}, fmt.Errorf("secret reference %s: %w: the path must be absolute", ref, ErrInvalidRef)
	}
	p = filepath.Clean(p)
	if l.FileDir != "" {
		dir, err := filepath.EvalSymlinks(l.FileDir)
		if err != nil {
			return Value{}, fmt.Errorf("secret reference %s: secret directory: %w", ref, err)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return Value{}, fmt.Errorf("secret reference %s: %w: no such file", ref, ErrNotFound)
			}
			return Value{}, fmt.Errorf("secret reference %s: %w", ref, err)
		}
		rel, err := filepath.Rel(dir, real)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return Value{}, fmt.Errorf("secret reference %s: %w: files must be under %s", ref, ErrForbidden, l.FileDir)
		}
		p = real
	}
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Value{}, fmt.Errorf("secret reference %s: %w: no such file", ref, ErrNotFound)
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in the message
		}
		return Value{}, fmt.Errorf("secret reference %s: read: %w", ref, err)
	}
	if !l.KeepNewline {
		b = bytes.TrimSuffix(b, []byte("\n"))
		b = bytes.TrimSuffix(b, []byte("\r"))
	}
	return NewValue(b), nil
}
