package httpsource

import (
	"encoding/json"
	"time"

	"github.com/no8s/no8s/libs/platform/secret"
)

// The built-in type (created by the store's migrations).
const (
	Type    = "HttpSource"
	Version = "v1"
)

// KeyPrefix prefixes every label and annotation of HttpSources: only
// registry-sync writes them (the gateway's reserved keys,
// docs/security.md).
const KeyPrefix = "httpsource.no8s.io/"

// LabelSource is the label registry-sync puts on every resource an
// HttpSource manages: the source's name. The resources of one source are
// listed by it, in the source's namespace.
const LabelSource = KeyPrefix + "source"

// AnnotationApplied is the annotation registry-sync puts on every resource
// it manages: a digest of the spec and labels it last wrote, so that a
// field removed from the mapping's result is seen as a change although the
// stored spec carries the target type's defaults.
const AnnotationApplied = KeyPrefix + "applied"

// Defaults and bounds of the spec (the schema says the same).
const (
	DefaultInterval       = time.Minute
	DefaultTimeoutSeconds = 10
	MaxTimeoutSeconds     = 60
)

// Spec is an HttpSource's spec.
type Spec struct {
	// URL is polled with GET (http or https; no user info).
	URL string `json:"url"`
	// Headers are sent with every poll, each value from a secret
	// reference (never inline).
	Headers map[string]secret.Ref `json:"headers,omitempty"`
	// Interval is the time between polls (^\d+(s|m|h)$, default 1m).
	Interval string `json:"interval,omitempty"`
	// TimeoutSeconds bounds one poll, body included (default 10, 1–60).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// ItemsPointer is the JSON pointer of the list in the body; "" is the
	// body itself.
	ItemsPointer string `json:"itemsPointer"`
	// Target is the type of the resources made.
	Target Target `json:"target"`
	// NamePointer (a JSON pointer into the item, "" the item itself) or
	// NameTemplate (a template run with the item) gives each resource's
	// name; exactly one is set.
	NamePointer  *string `json:"namePointer,omitempty"`
	NameTemplate string  `json:"nameTemplate,omitempty"`
	// Spec (a JSON object whose strings are templates run with the item)
	// or SpecPointer (a JSON pointer to an object in the item, "" the item
	// itself) gives each resource's spec; exactly one is set.
	Spec        json.RawMessage `json:"spec,omitempty"`
	SpecPointer *string         `json:"specPointer,omitempty"`
	// Labels are label templates run with the item.
	Labels map[string]string `json:"labels,omitempty"`
}

// Target names a resource type.
type Target struct {
	TypeName    string `json:"typeName"`
	TypeVersion string `json:"typeVersion"`
}

// String is Name/version.
func (t Target) String() string { return t.TypeName + "/" + t.TypeVersion }

// PollInterval is the spec's interval (the default when it does not parse).
func (s Spec) PollInterval() time.Duration {
	if d, err := time.ParseDuration(s.Interval); err == nil && d > 0 {
		return d
	}
	return DefaultInterval
}

// Timeout is the bound of one poll.
func (s Spec) Timeout() time.Duration {
	if s.TimeoutSeconds <= 0 {
		return DefaultTimeoutSeconds * time.Second
	}
	return time.Duration(min(s.TimeoutSeconds, MaxTimeoutSeconds)) * time.Second
}
