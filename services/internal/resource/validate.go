package resource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// Size limits. They are chosen so that the largest allowed resource, with its
// status, still fits one event under the broker's default 1 MiB payload limit.
const (
	// MaxRequestBytes bounds an HTTP request body.
	MaxRequestBytes = 1 << 20
	// MaxSpecBytes bounds a spec in compact JSON, defaults applied.
	MaxSpecBytes = 512 << 10
	// MaxMetadataBytes bounds labels, annotations and owner references together.
	MaxMetadataBytes = 64 << 10
	// MaxSchemaBytes bounds a resource type schema.
	MaxSchemaBytes = 512 << 10
	// MaxFinalizers bounds the number of finalizers on one resource.
	MaxFinalizers = 64
	// MaxEventBytes bounds a whole encoded event; the store refuses any write
	// whose event would be larger.
	MaxEventBytes = (1 << 20) - (16 << 10)
)

var (
	typeNameRE    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)
	typeVersionRE = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
	dns1123RE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	qualifiedRE   = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dnsSubdomRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	labelValueRE  = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// ValidateTypeName checks a resource type name: safe as a NATS subject token.
func ValidateTypeName(path, name string) *problem.FieldError {
	if !typeNameRE.MatchString(name) {
		return &problem.FieldError{Path: path, Message: fmt.Sprintf("%q is not a valid type name: it must match %s", name, typeNameRE)}
	}
	return nil
}

// ValidateTypeVersion checks a resource type version such as v1 or v1beta1.
func ValidateTypeVersion(path, version string) *problem.FieldError {
	if !typeVersionRE.MatchString(version) {
		return &problem.FieldError{Path: path, Message: fmt.Sprintf("%q is not a valid version: it must match %s (v1, v2beta1, ...)", version, typeVersionRE)}
	}
	return nil
}

// ValidateName checks a resource name: a DNS-1123 label.
func ValidateName(path, name string) *problem.FieldError {
	if name == "" {
		return &problem.FieldError{Path: path, Message: "name is required"}
	}
	if len(name) > 63 || !dns1123RE.MatchString(name) {
		return &problem.FieldError{Path: path, Message: fmt.Sprintf("%q is not a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", truncate(name))}
	}
	return nil
}

// validateQualifiedKey checks a label or annotation key: an optional DNS
// subdomain prefix and a name, as in Kubernetes.
func validateQualifiedKey(path, key string) *problem.FieldError {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, name = "", key
	}
	if hasPrefix && (prefix == "" || len(prefix) > 253 || !dnsSubdomRE.MatchString(prefix)) {
		return &problem.FieldError{Path: path, Message: fmt.Sprintf("key %q has an invalid prefix: it must be a DNS subdomain", truncate(key))}
	}
	if name == "" || len(name) > 63 || !qualifiedRE.MatchString(name) {
		return &problem.FieldError{Path: path, Message: fmt.Sprintf("key %q is invalid: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, with an optional DNS subdomain prefix and '/'", truncate(key))}
	}
	return nil
}

// ValidateMetadata checks labels, annotations and owner references and their
// combined size, returning every violation.
func ValidateMetadata(labels, annotations map[string]string, owners []OwnerReference) []problem.FieldError {
	var errs []problem.FieldError
	size := 0
	for k, v := range labels {
		p := "/labels/" + EscapePointer(k)
		if fe := validateQualifiedKey(p, k); fe != nil {
			errs = append(errs, *fe)
		}
		if len(v) > 63 || !labelValueRE.MatchString(v) {
			errs = append(errs, problem.FieldError{Path: p, Message: fmt.Sprintf("value %q is invalid: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", truncate(v))})
		}
		size += len(k) + len(v)
	}
	for k, v := range annotations {
		p := "/annotations/" + EscapePointer(k)
		if fe := validateQualifiedKey(p, k); fe != nil {
			errs = append(errs, *fe)
		}
		if fe := strictjson.CheckString(p, v); fe != nil {
			errs = append(errs, *fe)
		}
		size += len(k) + len(v)
	}
	for i, o := range owners {
		p := fmt.Sprintf("/owner_references/%d", i)
		if o.UID == "" {
			errs = append(errs, problem.FieldError{Path: p + "/uid", Message: "uid is required"})
		}
		if fe := ValidateName(p+"/name", o.Name); fe != nil {
			errs = append(errs, *fe)
		}
		if fe := ValidateTypeName(p+"/resource_type_name", o.ResourceTypeName); fe != nil {
			errs = append(errs, *fe)
		}
		if fe := ValidateTypeVersion(p+"/resource_type_version", o.ResourceTypeVersion); fe != nil {
			errs = append(errs, *fe)
		}
		size += len(o.UID) + len(o.Name) + len(o.ResourceTypeName) + len(o.ResourceTypeVersion) + 64
	}
	if size > MaxMetadataBytes {
		errs = append(errs, problem.FieldError{Path: "/labels", Message: fmt.Sprintf("labels, annotations and owner references total %d bytes, more than the %d allowed", size, MaxMetadataBytes)})
	}
	return errs
}

// ValidateFinalizer checks a finalizer name: a qualified key such as
// reconciler.no8s.io/postgres-database or external-controller.
func ValidateFinalizer(path, f string) *problem.FieldError {
	if len(f) > 316 {
		return &problem.FieldError{Path: path, Message: "finalizer is longer than 316 characters"}
	}
	if fe := validateQualifiedKey(path, f); fe != nil {
		return &problem.FieldError{Path: path, Message: fmt.Sprintf("%q is not a valid finalizer: a name with an optional DNS subdomain prefix, like example.com/cleanup", truncate(f))}
	}
	return nil
}

// CompactObject checks that raw is one JSON object and returns it compacted,
// without HTML escaping. An empty input is the empty object.
func CompactObject(path string, raw []byte) ([]byte, *problem.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return []byte("{}"), nil
	}
	if raw[0] != '{' {
		return nil, problem.Field(path, "must be a JSON object")
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, problem.New(problem.Invalid, problem.CodeMalformedJSON, "%s is not valid JSON: %v", path, err).
			WithFields(problem.FieldError{Path: path, Message: "not valid JSON"})
	}
	return buf.Bytes(), nil
}

// Marshal encodes v as compact JSON without HTML escaping, so that the size of
// a document does not grow with characters like < and &.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// EscapePointer escapes a key as a JSON pointer token (RFC 6901).
func EscapePointer(s string) string { return strictjson.EscapePointer(s) }

func truncate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
