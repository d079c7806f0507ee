package audit

import (
	"context"
	"sync"
	"time"
)

// Outcome is how an audited request ended.
type Outcome string

// The outcomes of a request.
const (
	// Succeeded: answered 2xx or 3xx.
	Succeeded Outcome = "succeeded"
	// Failed: answered 4xx or 5xx, other than a denial.
	Failed Outcome = "failed"
	// Denied: answered 401 or 403, or marked denied (Entry.Deny) whatever
	// the answer (a 404 that hides what the caller may not see).
	Denied Outcome = "denied"
)

// Sources of records.
const (
	// SourceHTTP is the REST API.
	SourceHTTP = "http"
	// SourceNATS is the queue input.
	SourceNATS = "nats"
)

// LogTag is the value of every record's "log" field: it tells audit lines
// from the process's other log lines when both go to stderr.
const LogTag = "audit"

// maxReason bounds a record's reason.
const maxReason = 256

// Record is one audited request. Its JSON field names are the audit log's
// and the audit stream's format.
type Record struct {
	// Log is always LogTag ("log").
	Log string `json:"log"`
	// Time is when the request was answered, UTC ("time").
	Time time.Time `json:"time"`
	// Source is where the request came from: SourceHTTP or SourceNATS
	// ("source").
	Source string `json:"source"`
	// SourceAddress is the client's IP address, as the gateway's
	// connection saw it ("source_address"; empty for the queue input).
	SourceAddress string `json:"source_address,omitempty"`
	// RequestID is the request's id, as the X-Request-Id answer header
	// and the access log carry it ("request_id").
	RequestID string `json:"request_id"`
	// TraceID is the request's trace id ("trace_id"; empty until the
	// gateway traces requests).
	TraceID string `json:"trace_id"`
	// User is who sent the request ("user").
	User Identity `json:"user"`
	// Verb is what it asked for: create, update, patch, delete, apply,
	// reconcile, revoke, ... ("verb").
	Verb string `json:"verb"`
	// Object is what it was about, as far as known ("object").
	Object Object `json:"object"`
	// DryRun marks a request that stored nothing ("dry_run").
	DryRun bool `json:"dry_run,omitempty"`
	// Method is the HTTP method ("method"; empty for the queue input).
	Method string `json:"method,omitempty"`
	// Route is the route template, never the URL: /api/v1/resources/:id
	// ("route"; empty for the queue input and an unknown route).
	Route string `json:"route,omitempty"`
	// Status is the HTTP status answered (the queue input's answers carry
	// one too) ("status").
	Status int `json:"status"`
	// Outcome is succeeded, failed or denied ("outcome").
	Outcome Outcome `json:"outcome"`
	// Reason says why a request was denied, in a few words ("reason";
	// empty unless denied).
	Reason string `json:"reason,omitempty"`
}

// Identity is who sent a request: its authn.Principal, without its
// credential.
type Identity struct {
	// Username is the user, service account or service ("username";
	// empty when the request was refused before anyone was identified).
	Username string `json:"username,omitempty"`
	// Groups are its groups ("groups").
	Groups []string `json:"groups,omitempty"`
	// AuthMethod is how it authenticated: token, bootstrap, jwt, none,
	// identity (a service's client certificate) ("auth_method").
	AuthMethod string `json:"auth_method,omitempty"`
	// TokenID is the API token's id, never its secret: the token used,
	// or the one refused ("token_id").
	TokenID string `json:"token_id,omitempty"`
}

// Object is what a request was about; each field is set where known.
type Object struct {
	// Kind is Resource, ResourceType, Namespace, AdmissionWebhook or Token
	// ("kind").
	Kind string `json:"kind,omitempty"`
	// Type and Version are a resource's type name and version; Version is
	// a resource type's own version ("type", "version").
	Type    string `json:"type,omitempty"`
	Version string `json:"version,omitempty"`
	// Namespace and Name name it ("namespace", "name").
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// ID is its id ("id").
	ID string `json:"id,omitempty"`
}

// Or is o with its empty fields taken from p.
func (o Object) Or(p Object) Object {
	o.fill(p)
	return o
}

// fill sets o's empty fields from p.
func (o *Object) fill(p Object) {
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&o.Kind, p.Kind}, {&o.Type, p.Type}, {&o.Version, p.Version},
		{&o.Namespace, p.Namespace}, {&o.Name, p.Name}, {&o.ID, p.ID},
	} {
		if *f.dst == "" {
			*f.dst = f.src
		}
	}
}

// Entry is the audit state of one request, filled by the layers it passes
// and read once it is answered. It is safe for concurrent use; every
// method of a nil *Entry does nothing.
type Entry struct {
	mu     sync.Mutex
	user   *Identity
	verb   string
	object Object
	denied bool
	reason string
}

// NewEntry returns an empty Entry.
func NewEntry() *Entry { return &Entry{} }

type entryKey struct{}

// WithEntry returns ctx carrying e.
func WithEntry(ctx context.Context, e *Entry) context.Context {
	return context.WithValue(ctx, entryKey{}, e)
}

// EntryFrom returns the request's Entry, or nil when it is not audited.
func EntryFrom(ctx context.Context) *Entry {
	e, _ := ctx.Value(entryKey{}).(*Entry)
	return e
}

// SetUser says who sent the request, once known (the queue input, which
// authenticates inside the request): it replaces the identity read from the
// request's context when it is answered.
func (e *Entry) SetUser(u Identity) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.user = &u
}

// SetVerb says what the request asks for (create, update, delete, ...);
// without it the verb is derived from the method and route.
func (e *Entry) SetVerb(v string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.verb = v
}

// SetObject says what the request is about: o's non-empty fields replace
// those set before; what is still unknown when it is answered is taken
// from its route and its answer.
func (e *Entry) SetObject(o Object) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	prev := e.object
	e.object = o
	e.object.fill(prev)
}

// Deny marks the request denied, with a short reason, whatever it is
// answered: an authorization layer that answers 404 to hide what the
// caller may not see calls it too. The first reason is kept.
func (e *Entry) Deny(reason string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.denied {
		e.denied, e.reason = true, reason
	}
}

// State is what the layers put in an Entry.
type State struct {
	// User is nil unless SetUser was called.
	User   *Identity
	Verb   string
	Object Object
	Denied bool
	Reason string
}

// State returns what the layers put in e (zero for nil).
func (e *Entry) State() State {
	if e == nil {
		return State{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return State{User: e.user, Verb: e.verb, Object: e.object, Denied: e.denied, Reason: e.reason}
}

// Complete fills r from the entry's state: its verb and object take
// precedence over r's (derived from the route and answer), and the
// outcome follows from the denial and r.Status. r's own Reason (the
// answer's detail) stands for a 401 or 403 that no layer explained.
func (r Record) Complete(st State) Record {
	if st.User != nil {
		r.User = *st.User
	}
	if st.Verb != "" {
		r.Verb = st.Verb
	}
	obj := st.Object
	obj.fill(r.Object)
	r.Object = obj
	switch {
	case st.Denied:
		r.Outcome, r.Reason = Denied, st.Reason
	case r.Status == 401 || r.Status == 403:
		r.Outcome = Denied
	case r.Status >= 200 && r.Status < 400:
		r.Outcome, r.Reason = Succeeded, ""
	default:
		r.Outcome, r.Reason = Failed, ""
	}
	if len(r.Reason) > maxReason {
		r.Reason = r.Reason[:maxReason]
	}
	return r
}
