package resource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// ValidateMetadata checks labels, annotations and owner references (by the
// rules of libs/api/names; annotation values as JSON strings) and their
// combined size, returning every violation. A combined size over the limit
// points at the largest of the three.
func ValidateMetadata(labels, annotations map[string]string, owners []OwnerReference) []problem.FieldError {
	var errs []problem.FieldError
	// sizes of /labels, /annotations and /owner_references.
	var sizes [3]int
	for k, v := range labels {
		p := "/labels/" + EscapePointer(k)
		if fe := names.QualifiedKey(p, k); fe != nil {
			errs = append(errs, *fe)
		}
		if fe := names.LabelValue(p, v); fe != nil {
			errs = append(errs, *fe)
		}
		sizes[0] += len(k) + len(v)
	}
	for k, v := range annotations {
		p := "/annotations/" + EscapePointer(k)
		if fe := names.QualifiedKey(p, k); fe != nil {
			errs = append(errs, *fe)
		}
		if fe := strictjson.CheckString(p, v); fe != nil {
			errs = append(errs, *fe)
		}
		sizes[1] += len(k) + len(v)
	}
	for i, o := range owners {
		p := fmt.Sprintf("/owner_references/%d", i)
		if o.UID == "" {
			errs = append(errs, problem.FieldError{Path: p + "/uid", Message: "uid is required"})
		}
		if fe := names.Name(p+"/name", o.Name); fe != nil {
			errs = append(errs, *fe)
		}
		if fe := names.TypeName(p+"/resource_type_name", o.ResourceTypeName); fe != nil {
			errs = append(errs, *fe)
		}
		if fe := names.TypeVersion(p+"/resource_type_version", o.ResourceTypeVersion); fe != nil {
			errs = append(errs, *fe)
		}
		sizes[2] += len(o.UID) + len(o.Name) + len(o.ResourceTypeName) + len(o.ResourceTypeVersion) + 64
	}
	if size := sizes[0] + sizes[1] + sizes[2]; size > names.MaxMetadataBytes {
		path := []string{"/labels", "/annotations", "/owner_references"}[slices.Index(sizes[:], slices.Max(sizes[:]))]
		errs = append(errs, problem.FieldError{Path: path, Message: fmt.Sprintf("labels, annotations and owner references total %d bytes, more than the %d allowed", size, names.MaxMetadataBytes)})
	}
	return errs
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
	// Resources, the documents of every event and answer, have a renderer
	// of their own that produces the same bytes without reflection.
	var r *Resource
	switch x := v.(type) {
	case *Resource:
		r = x
	case Resource:
		r = &x
	}
	if r != nil {
		if b, ok := AppendJSON(make([]byte, 0, jsonSize(r)), r); ok {
			return b, nil
		}
	}
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
