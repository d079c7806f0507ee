// Package webhookconf defines an admission webhook registration: its fields,
// defaults and validation rules. The api-gateway checks registrations with it
// to answer 400 with field paths, the store checks them again before writing,
// and admission reads them to build its webhook chain.
package webhookconf

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/problem"
)

// Webhook types.
const (
	TypeMutating   = "mutating"
	TypeValidating = "validating"
)

// Operations a webhook can intercept.
const (
	OpCreate = "CREATE"
	OpUpdate = "UPDATE"
	OpDelete = "DELETE"
)

// Failure policies: what a failed call (unreachable, slow, erroring or
// nonsensical webhook) means for the request.
const (
	// PolicyFail refuses the request (503 naming the webhook).
	PolicyFail = "Fail"
	// PolicyIgnore goes on as if the webhook had not been registered.
	PolicyIgnore = "Ignore"
)

// Defaults and bounds.
const (
	DefaultTimeoutSeconds = 10
	MinTimeoutSeconds     = 1
	MaxTimeoutSeconds     = 30
	MaxURLLength          = 2048
	MaxCABundleBytes      = 64 << 10
	// MaxNamespaces bounds a webhook's namespace list.
	MaxNamespaces = 256
)

// Webhook is one registration. An empty ResourceTypeName or
// ResourceTypeVersion matches every type or version, an empty Namespaces
// every namespace; an empty CABundle means the system's roots.
type Webhook struct {
	ID                  int64
	Name                string
	ResourceTypeName    string
	ResourceTypeVersion string
	// Namespaces, when not empty, restricts the webhook to resources in
	// these namespaces (webhooks themselves are global).
	Namespaces      []string
	URL             string
	Type            string
	Operations      []string
	TimeoutSeconds  int
	FailurePolicy   string
	Ordering        int
	CABundle        string
	ResourceVersion int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Timeout is the bound of one call.
func (w *Webhook) Timeout() time.Duration { return time.Duration(w.TimeoutSeconds) * time.Second }

// Matches reports whether the webhook intercepts op on a resource of the
// type and version in the namespace.
func (w *Webhook) Matches(op, typeName, typeVersion, namespace string) bool {
	return (w.ResourceTypeName == "" || w.ResourceTypeName == typeName) &&
		(w.ResourceTypeVersion == "" || w.ResourceTypeVersion == typeVersion) &&
		(len(w.Namespaces) == 0 || slices.Contains(w.Namespaces, namespace)) &&
		slices.Contains(w.Operations, op)
}

// Less orders webhooks as the chain calls them: by ordering, then name.
func Less(a, b *Webhook) bool {
	if a.Ordering != b.Ordering {
		return a.Ordering < b.Ordering
	}
	return a.Name < b.Name
}

// Validate returns every violation of w's registration fields, with JSON
// pointers as the public API names them (/name, /webhook_url, ...).
func Validate(w *Webhook) []problem.FieldError {
	var errs fieldErrors
	errs.validateNames(w)
	u, uerr := checkURL(w.URL)
	if uerr != "" {
		errs.add("/webhook_url", "%s", uerr)
	}
	errs.validateType(w.Type)
	errs.validateOperations(w)
	errs.validateCall(w)
	errs.validateCABundle(w.CABundle, u)
	return errs
}

// fieldErrors are the violations Validate found, in the order it checks.
type fieldErrors []problem.FieldError

func (errs *fieldErrors) add(path, format string, args ...any) {
	*errs = append(*errs, problem.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// field adds fe, the result of a names check, unless it is nil.
func (errs *fieldErrors) field(fe *problem.FieldError) {
	if fe != nil {
		*errs = append(*errs, *fe)
	}
}

// validateNames checks the names w holds: its own, the resource type's and
// the namespaces'.
func (errs *fieldErrors) validateNames(w *Webhook) {
	errs.field(names.DNSSubdomain("/name", w.Name))
	if w.ResourceTypeName != "" {
		errs.field(names.TypeName("/resource_type_name", w.ResourceTypeName))
	}
	if w.ResourceTypeVersion != "" {
		errs.field(names.TypeVersion("/resource_type_version", w.ResourceTypeVersion))
	}
	for i, ns := range w.Namespaces {
		p := fmt.Sprintf("/namespaces/%d", i)
		if fe := names.Namespace(p, ns); fe != nil {
			*errs = append(*errs, *fe)
		} else if slices.Index(w.Namespaces, ns) != i {
			errs.add(p, "%s is listed twice", ns)
		}
	}
	if len(w.Namespaces) > MaxNamespaces {
		errs.add("/namespaces", "at most %d namespaces: leave the list empty to match every namespace", MaxNamespaces)
	}
}

func (errs *fieldErrors) validateType(typ string) {
	switch typ {
	case TypeMutating, TypeValidating:
	case "":
		errs.add("/webhook_type", "webhook_type is required: mutating or validating")
	default:
		errs.add("/webhook_type", "%q is not a webhook type: mutating or validating", truncate(typ))
	}
}

// validateOperations checks w's operations: at least one, each known and
// listed once, and no DELETE for a mutating webhook.
func (errs *fieldErrors) validateOperations(w *Webhook) {
	if len(w.Operations) == 0 {
		errs.add("/operations", "at least one operation is required: CREATE, UPDATE or DELETE")
	}
	for i, op := range w.Operations {
		p := fmt.Sprintf("/operations/%d", i)
		switch {
		case op != OpCreate && op != OpUpdate && op != OpDelete:
			errs.add(p, "%q is not an operation: CREATE, UPDATE or DELETE", truncate(op))
		case slices.Index(w.Operations, op) != i:
			errs.add(p, "%s is listed twice", op)
		case op == OpDelete && w.Type == TypeMutating:
			errs.add(p, "mutating webhooks are not called on DELETE: register a validating webhook for it")
		}
	}
}

// validateCall checks how w is called: its timeout, failure policy and
// ordering.
func (errs *fieldErrors) validateCall(w *Webhook) {
	if w.TimeoutSeconds < MinTimeoutSeconds || w.TimeoutSeconds > MaxTimeoutSeconds {
		errs.add("/timeout_seconds", "must be between %d and %d", MinTimeoutSeconds, MaxTimeoutSeconds)
	}
	switch w.FailurePolicy {
	case PolicyFail, PolicyIgnore:
	default:
		errs.add("/failure_policy", "%q is not a failure policy: Fail or Ignore", truncate(w.FailurePolicy))
	}
	if w.Ordering < math.MinInt32 || w.Ordering > math.MaxInt32 {
		errs.add("/ordering", "must be a 32-bit integer")
	}
}

// validateCABundle checks the CA bundle, if any, against the parsed
// webhook URL u (nil when it did not parse).
func (errs *fieldErrors) validateCABundle(bundle string, u *url.URL) {
	if bundle == "" {
		return
	}
	if len(bundle) > MaxCABundleBytes {
		errs.add("/ca_bundle", "longer than %d bytes", MaxCABundleBytes)
	} else if _, err := ParseCABundle(bundle); err != nil {
		errs.add("/ca_bundle", "%v", err)
	} else if u != nil && u.Scheme != "https" {
		errs.add("/ca_bundle", "a CA bundle only applies to an https webhook_url")
	}
}

func checkURL(raw string) (*url.URL, string) {
	if raw == "" {
		return nil, "webhook_url is required"
	}
	if len(raw) > MaxURLLength {
		return nil, fmt.Sprintf("longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Sprintf("not a URL: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, "must be an absolute http:// or https:// URL"
	case u.Host == "" || u.Hostname() == "":
		return nil, "must name a host"
	case u.User != nil:
		return nil, "must not carry user information; authenticate with TLS instead"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, "must not have a fragment"
	}
	return u, ""
}

// ParseCABundle parses PEM certificates into a pool. Anything but
// CERTIFICATE blocks and surrounding whitespace is an error.
func ParseCABundle(bundle string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	rest := []byte(bundle)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d is not a valid certificate: %v", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, fmt.Errorf("no PEM certificate found")
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, fmt.Errorf("unexpected data after PEM certificate %d", n)
	}
	return pool, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
