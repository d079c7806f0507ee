package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/services/internal/manifest"
)

// FieldManager is the field manager of ApplyDryRun's server-side applies.
const FieldManager = "no8s-check"

// object is one document of a stream to apply: what the path needs, and
// the document's text, sent as it is.
type object struct {
	line       int // where the document starts in the stream
	apiVersion string
	kind       string
	name       string
	namespace  string // metadata.namespace, "" when absent
	data       []byte
}

// ref names the object in messages: Kind/name.
func (o object) ref() string { return o.kind + "/" + o.name }

// ApplyDryRun applies every object of a multi-document YAML stream (as
// `helm template` prints it: `---` separators, comments and empty
// documents skipped) into namespace ns with server-side apply in dry-run
// mode (PATCH, application/apply-patch+yaml, dryRun=All,
// fieldManager=no8s-check, force=true): nothing is stored.
//
// An object whose metadata.namespace is set goes to that namespace; a
// cluster-scoped one to none. Each kind's resource comes from the API
// server's discovery (cached).
//
// A stream that does not parse, or a document without apiVersion, kind or
// metadata.name, is an error and nothing is applied. Otherwise every
// object is applied, and the error names each one that was refused, as
// Kind/name (line N): the API server's message, an unknown kind included.
// The warnings are every Warning header's text, each prefixed with
// Kind/name.
func (s *Server) ApplyDryRun(ctx context.Context, ns string, manifests []byte) (warnings []string, err error) {
	objs, err := parseObjects(manifests)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, o := range objs {
		w, err := s.applyDryRun(ctx, ns, o)
		for _, text := range w {
			warnings = append(warnings, o.ref()+": "+text)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (line %d): %w", o.ref(), o.line, err))
		}
	}
	return warnings, errors.Join(errs...)
}

// applyDryRun applies one object and returns its warnings and, when the
// API server refuses it, its message.
func (s *Server) applyDryRun(ctx context.Context, ns string, o object) ([]string, error) {
	res, err := s.resource(ctx, o.apiVersion, o.kind)
	if err != nil {
		return nil, err
	}
	path := "/apis/" + o.apiVersion
	if !strings.Contains(o.apiVersion, "/") {
		path = "/api/" + o.apiVersion
	}
	if res.Namespaced {
		if o.namespace != "" {
			ns = o.namespace
		}
		path += "/namespaces/" + url.PathEscape(ns)
	}
	path += "/" + res.Name + "/" + url.PathEscape(o.name) +
		"?dryRun=All&fieldManager=" + FieldManager + "&force=true"
	status, body, warnings, err := s.Do(ctx, http.MethodPatch, path, "application/apply-patch+yaml", o.data)
	if err != nil {
		return nil, err
	}
	if status/100 != 2 {
		return warnings, fmt.Errorf("%d %s", status, statusMessage(body))
	}
	return warnings, nil
}

// parseObjects splits a stream into its documents (manifest.Split: the
// same `---` rule as no8s's own files) and reads each one's apiVersion,
// kind and metadata. Documents holding nothing (null) are skipped.
func parseObjects(stream []byte) ([]object, error) {
	var (
		objs []object
		errs []error
	)
	for _, c := range manifest.Split(stream) {
		var doc struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   struct {
				Name      string `yaml:"name"`
				Namespace string `yaml:"namespace"`
			} `yaml:"metadata"`
		}
		var node yaml.Node
		if err := yaml.Unmarshal(c.Data, &node); err != nil {
			errs = append(errs, fmt.Errorf("document at line %d: %s", c.Line, streamLines(err, c.Line)))
			continue
		}
		if len(node.Content) == 0 || (node.Content[0].Kind == yaml.ScalarNode && node.Content[0].Tag == "!!null") {
			continue
		}
		if node.Content[0].Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("document at line %d: not a mapping", c.Line))
			continue
		}
		if err := node.Decode(&doc); err != nil {
			errs = append(errs, fmt.Errorf("document at line %d: %w", c.Line, err))
			continue
		}
		var missing []string
		for _, f := range []struct{ name, value string }{{"apiVersion", doc.APIVersion}, {"kind", doc.Kind}, {"metadata.name", doc.Metadata.Name}} {
			if f.value == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("document at line %d: no %s", c.Line, strings.Join(missing, ", ")))
			continue
		}
		objs = append(objs, object{line: c.Line, apiVersion: doc.APIVersion, kind: doc.Kind,
			name: doc.Metadata.Name, namespace: doc.Metadata.Namespace, data: c.Data})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("manifests: nothing applied: %w", errors.Join(errs...))
	}
	return objs, nil
}

// streamLines returns the message of a YAML parse error of a document
// that starts at line start of the stream, its `line N` counted from the
// stream's start.
func streamLines(err error, start int) string {
	msg := err.Error()
	var n int
	if _, scanErr := fmt.Sscanf(msg, "yaml: line %d:", &n); scanErr != nil {
		return msg
	}
	_, after, _ := strings.Cut(msg, ":")
	_, after, _ = strings.Cut(after, ":")
	return fmt.Sprintf("yaml: line %d:%s", start+n-1, after)
}

// apiResource is one entry of a discovery document (an APIResourceList's
// resources).
type apiResource struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Namespaced bool   `json:"namespaced"`
}

// resource returns the resource serving kind in apiVersion, from the API
// server's discovery of that group/version (GET /api/v1 or
// /apis/GROUP/VERSION): the one whose kind matches and whose name has no
// `/` (subresources do). A group/version's answer is cached; a kind not in
// it asks again once (a CRD may have come since).
func (s *Server) resource(ctx context.Context, apiVersion, kind string) (apiResource, error) {
	s.mu.Lock()
	cached, ok := s.discovery[apiVersion]
	s.mu.Unlock()
	if ok {
		if r, found := findKind(cached, kind); found {
			return r, nil
		}
	}
	path := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		path = "/api/" + apiVersion
	}
	status, body, _, err := s.Do(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return apiResource{}, fmt.Errorf("discovery of %s: %w", apiVersion, err)
	}
	if status == http.StatusNotFound {
		return apiResource{}, fmt.Errorf("unknown kind %s: the API server serves no %s", kind, apiVersion)
	}
	if status != http.StatusOK {
		return apiResource{}, fmt.Errorf("discovery of %s: %d %s", apiVersion, status, statusMessage(body))
	}
	var list struct {
		Resources []apiResource `json:"resources"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return apiResource{}, fmt.Errorf("discovery of %s: %w", apiVersion, err)
	}
	s.mu.Lock()
	s.discovery[apiVersion] = list.Resources
	s.mu.Unlock()
	if r, found := findKind(list.Resources, kind); found {
		return r, nil
	}
	return apiResource{}, fmt.Errorf("unknown kind %s: %s serves no such kind", kind, apiVersion)
}

// findKind returns the resource of kind among rs, subresources left out.
func findKind(rs []apiResource, kind string) (apiResource, bool) {
	for _, r := range rs {
		if r.Kind == kind && !strings.Contains(r.Name, "/") {
			return r, true
		}
	}
	return apiResource{}, false
}

// parseWarnings returns the text of each warning in Warning header values
// (RFC 9110 §5.5 lists, RFC 7234 §5.5 warning-values: `299 - "text"`, an
// optional date after). A value that does not parse is kept whole.
func parseWarnings(values []string) []string {
	var out []string
	for _, v := range values {
		for rest := strings.TrimSpace(v); rest != ""; {
			text, next, ok := parseWarning(rest)
			if !ok {
				out = append(out, rest)
				break
			}
			out = append(out, text)
			rest = next
		}
	}
	return out
}

// parseWarning reads one warning-value at the start of s (code SP agent
// SP quoted-text [SP quoted-date]) and returns its text and what follows
// the next comma.
func parseWarning(s string) (text, rest string, ok bool) {
	code, s, ok := strings.Cut(s, " ")
	if !ok || len(code) != 3 {
		return "", "", false
	}
	if _, s, ok = strings.Cut(strings.TrimLeft(s, " "), " "); !ok { // the agent
		return "", "", false
	}
	s = strings.TrimLeft(s, " ")
	if text, s, ok = unquote(s); !ok {
		return "", "", false
	}
	s = strings.TrimLeft(s, " ")
	if strings.HasPrefix(s, `"`) { // the date
		if _, s, ok = unquote(s); !ok {
			return "", "", false
		}
		s = strings.TrimLeft(s, " ")
	}
	switch {
	case s == "":
		return text, "", true
	case s[0] == ',':
		return text, strings.TrimLeft(s[1:], " "), true
	}
	return "", "", false
}

// unquote reads a quoted-string (with `\` escapes) at the start of s and
// returns its content and what follows it.
func unquote(s string) (content, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 == len(s) {
				return "", "", false
			}
			i++
			b.WriteByte(s[i])
		case '"':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}
