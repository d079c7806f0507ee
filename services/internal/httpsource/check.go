package httpsource

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// reservedHeaders are the headers a spec may not set: the poll sets them
// (If-None-Match, Host) or the transport does.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "If-None-Match", "Te", "Upgrade", "Trailer"}

// builtinTypes are the types an HttpSource may not target: they are made
// by registry-sync itself or are sources.
func builtinTypes() []Target {
	return []Target{
		{tenancy.RegistryType, tenancy.Version}, {tenancy.TemplateType, tenancy.Version}, {tenancy.TenantType, tenancy.Version}, {Type, Version},
	}
}

// Check runs the static checks of a spec that the schema cannot express,
// each error naming its field by JSON pointer: the URL is http(s) with a
// host and no user info (credentials go in secret headers); header names
// are tokens and not ones the poll sets; exactly one of namePointer and
// nameTemplate, and of spec and specPointer; pointers are RFC 6901;
// templates parse; labels do not set LabelSource; the target is not a
// built-in type. The outbound address rule and the target type's existence
// are admission's (they need its policy and type cache).
func Check(s Spec) []problem.FieldError {
	var errs []problem.FieldError
	add := func(path, format string, args ...any) {
		errs = append(errs, problem.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	checkURL(add, s.URL)
	checkHeaders(add, s.Headers)
	if _, err := ParsePointer(s.ItemsPointer); err != nil {
		add("/spec/itemsPointer", "%v", err)
	}
	checkName(add, s)
	checkSpecTemplate(add, s)
	checkLabels(add, s.Labels)
	if slices.Contains(builtinTypes(), s.Target) {
		add("/spec/target/typeName", "%s is a built-in type: an HttpSource cannot make it", s.Target)
	}
	return errs
}

// addFunc adds a field error to Check's list.
type addFunc func(path, format string, args ...any)

// checkURL: http(s), a host, no user info, no fragment.
func checkURL(add addFunc, raw string) {
	switch u, err := url.Parse(raw); {
	case err != nil:
		add("/spec/url", "the URL does not parse: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		add("/spec/url", "the URL's scheme is %q: want http or https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		add("/spec/url", "the URL has no host")
	case u.User != nil:
		add("/spec/url", "the URL carries user info: put credentials in headers, from secret references")
	case u.Fragment != "":
		add("/spec/url", "the URL has a fragment")
	}
}

// checkHeaders: each name a token the poll does not set, each value a
// secret reference; in name order.
func checkHeaders(add addFunc, headers map[string]secret.Ref) {
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		p := "/spec/headers/" + resource.EscapePointer(k)
		switch {
		case !validToken(k):
			add(p, "%q is not an HTTP header name", k)
		case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(k)):
			add(p, "header %s is set by the poll itself", http.CanonicalHeaderKey(k))
		case headers[k].IsZero():
			add(p, "the header's value must be a secret reference: {\"env\": \"NAME\"} or {\"file\": \"/path\"}")
		}
	}
}

// checkName: exactly one of namePointer (a pointer) and nameTemplate (a
// template that parses).
func checkName(add addFunc, s Spec) {
	switch {
	case s.NamePointer != nil && s.NameTemplate != "":
		add("/spec/nameTemplate", "set one of namePointer and nameTemplate, not both")
	case s.NamePointer != nil:
		if _, err := ParsePointer(*s.NamePointer); err != nil {
			add("/spec/namePointer", "%v", err)
		}
	case s.NameTemplate != "":
		if err := tenancy.ParseText("/spec/nameTemplate", s.NameTemplate); err != nil {
			add("/spec/nameTemplate", "template does not parse: %v", unwrap(err))
		}
	default:
		add("/spec/nameTemplate", "one of namePointer and nameTemplate is required")
	}
}

// checkSpecTemplate: exactly one of specPointer (a pointer) and spec (a
// template that parses, the error at the failing field's path).
func checkSpecTemplate(add addFunc, s Spec) {
	switch {
	case s.SpecPointer != nil && len(s.Spec) > 0:
		add("/spec/specPointer", "set one of spec and specPointer, not both")
	case s.SpecPointer != nil:
		if _, err := ParsePointer(*s.SpecPointer); err != nil {
			add("/spec/specPointer", "%v", err)
		}
	case len(s.Spec) > 0:
		if err := tenancy.ParseObject("/spec/spec", s.Spec); err != nil {
			path := "/spec/spec"
			var re *tenancy.RenderError
			if errors.As(err, &re) {
				path = re.Path
			}
			add(path, "template does not parse: %v", unwrap(err))
		}
	default:
		add("/spec/spec", "one of spec and specPointer is required")
	}
}

// checkLabels: no LabelSource, each value a template that parses; in key
// order.
func checkLabels(add addFunc, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		p := "/spec/labels/" + resource.EscapePointer(k)
		if k == LabelSource {
			add(p, "label %s is set by registry-sync (the source's name)", LabelSource)
			continue
		}
		if err := tenancy.ParseText(p, labels[k]); err != nil {
			add(p, "template does not parse: %v", unwrap(err))
		}
	}
}

// unwrap is a RenderError's cause (its path is the field's already).
func unwrap(err error) error {
	var re *tenancy.RenderError
	if errors.As(err, &re) {
		return re.Err
	}
	return err
}

// validToken reports whether s is an RFC 9110 token (a header name).
func validToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
