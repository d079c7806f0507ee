package names

import (
	"fmt"
	"strings"
)

// FieldError names one offending field by JSON pointer (for example /name)
// and says what is wrong with it.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// TypeName checks a resource type name (PostgresDatabase): an upper-case
// letter, then letters and digits, at most 63; safe as a NATS subject token
// and a KV key part.
func TypeName(path, name string) *FieldError {
	if !matchTypeName(name) {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is not a valid type name: it must match %s", truncate(name), typeNamePattern)}
	}
	return nil
}

// TypeVersion checks a resource type version such as v1 or v1beta1.
func TypeVersion(path, version string) *FieldError {
	if !matchTypeVersion(version) {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is not a valid version: it must match %s (v1, v2beta1, ...)", truncate(version), typeVersionPattern)}
	}
	return nil
}

// IsDNSLabel reports whether s is a DNS-1123 label: at most 63 lower-case
// letters, digits and '-', starting and ending with a letter or digit.
func IsDNSLabel(s string) bool { return len(s) <= MaxNameLength && matchDNSLabel(s) }

// IsDNSSubdomain reports whether s is a DNS subdomain: at most 253
// characters, dot-separated DNS labels.
func IsDNSSubdomain(s string) bool { return len(s) <= MaxSubdomainLength && matchDNSSubdomain(s) }

// Name checks a resource's (or a reconciler's) name: a DNS-1123 label.
func Name(path, name string) *FieldError {
	if name == "" {
		return &FieldError{Path: path, Message: "name is required"}
	}
	if !IsDNSLabel(name) {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is not a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", truncate(name))}
	}
	return nil
}

// DefaultNamespace is the namespace of a resource created without one. It
// always exists and cannot be deleted, so that requests that name no
// namespace (the original Operator Controller API's paths and bodies) keep
// working unchanged.
const DefaultNamespace = "default"

// Namespace checks a namespace name: a DNS-1123 label. An empty name is
// refused here; callers that default it to DefaultNamespace do so before
// checking (OrDefault).
func Namespace(path, ns string) *FieldError {
	if ns == "" {
		return &FieldError{Path: path, Message: "namespace is required"}
	}
	if !IsDNSLabel(ns) {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is not a valid namespace: a DNS-1123 label, at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", truncate(ns))}
	}
	return nil
}

// OrDefault is ns, or DefaultNamespace when ns is empty: what a request
// that names no namespace means.
func OrDefault(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// DNSSubdomain checks a name that must be a DNS subdomain (a webhook's
// name, for example).
func DNSSubdomain(path, name string) *FieldError {
	if name == "" {
		return &FieldError{Path: path, Message: "name is required"}
	}
	if !IsDNSSubdomain(name) {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is not a DNS subdomain: at most 253 lowercase letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit (policy.example.com)", truncate(name))}
	}
	return nil
}

// QualifiedKey checks a label or annotation key: an optional DNS subdomain
// prefix and '/', then a name, as in Kubernetes.
func QualifiedKey(path, key string) *FieldError {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, name = "", key
	}
	if hasPrefix && (prefix == "" || !IsDNSSubdomain(prefix)) {
		return &FieldError{Path: path, Message: fmt.Sprintf("key %q has an invalid prefix: it must be a DNS subdomain", truncate(key))}
	}
	if name == "" || len(name) > MaxNameLength || !matchQualified(name) {
		return &FieldError{Path: path, Message: fmt.Sprintf("key %q is invalid: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, with an optional DNS subdomain prefix and '/'", truncate(key))}
	}
	return nil
}

// LabelValue checks a label's value: empty, or at most 63 letters, digits,
// '-', '_' or '.', starting and ending with a letter or digit.
func LabelValue(path, v string) *FieldError {
	if len(v) > MaxNameLength || !matchLabelValue(v) {
		return &FieldError{Path: path, Message: fmt.Sprintf("value %q is invalid: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", truncate(v))}
	}
	return nil
}

// Finalizer checks a finalizer: a qualified key such as
// reconciler.no8s.io/postgres-database or external-controller.
func Finalizer(path, f string) *FieldError {
	if len(f) > MaxFinalizerLength {
		return &FieldError{Path: path, Message: fmt.Sprintf("finalizer is longer than %d characters", MaxFinalizerLength)}
	}
	if QualifiedKey(path, f) != nil {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is not a valid finalizer: a name with an optional DNS subdomain prefix, like example.com/cleanup", truncate(f))}
	}
	return nil
}

// ReconcilerFinalizerPrefix prefixes a reconciler's finalizer.
const ReconcilerFinalizerPrefix = "reconciler.no8s.io/"

// ReconcilerFinalizer is the finalizer of the reconciler with the given
// name: reconciler.no8s.io/<name>.
func ReconcilerFinalizer(reconciler string) string { return ReconcilerFinalizerPrefix + reconciler }

// DeclaredFinalizer checks a finalizer a reconciler declares as its own
// beyond reconciler.no8s.io/<name> (an action plugin's, such as
// github_actions): a valid finalizer outside the reconciler.no8s.io/ prefix,
// where every name belongs to the reconciler it names.
func DeclaredFinalizer(path, f string) *FieldError {
	if fe := Finalizer(path, f); fe != nil {
		return fe
	}
	if strings.HasPrefix(f, ReconcilerFinalizerPrefix) {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is under %s, where each finalizer is the reconciler's it names: declare another name", truncate(f), ReconcilerFinalizerPrefix)}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
