package resource

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends r's canonical document to b: byte for byte what Marshal
// (encoding/json without HTML escaping) produces, without reflection. Every
// event and every answer carrying a resource is rendered here. ok is false
// for a document encoding/json refuses (spec or outputs that are not JSON, a
// time outside years 0-9999); Marshal then reports the error.
func AppendJSON(b []byte, r *Resource) (out []byte, ok bool) {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, `,"uid":`...)
	b = AppendString(b, r.UID)
	b = append(b, `,"namespace":`...)
	b = AppendString(b, r.Namespace)
	b = append(b, `,"name":`...)
	b = AppendString(b, r.Name)
	b = append(b, `,"resource_type_name":`...)
	b = AppendString(b, r.ResourceTypeName)
	b = append(b, `,"resource_type_version":`...)
	b = AppendString(b, r.ResourceTypeVersion)
	b = append(b, `,"labels":`...)
	b = AppendStringMap(b, r.Labels)
	b = append(b, `,"annotations":`...)
	b = AppendStringMap(b, r.Annotations)
	b = append(b, `,"owner_references":`...)
	b = AppendOwnerReferences(b, r.OwnerReferences)
	b = append(b, `,"spec":`...)
	if b, ok = appendRaw(b, r.Spec); !ok {
		return b, false
	}
	b = append(b, `,"status":`...)
	b = AppendString(b, r.Status)
	b = append(b, `,"status_message":`...)
	b = AppendString(b, r.StatusMessage)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, r.Generation, 10)
	b = append(b, `,"observed_generation":`...)
	b = strconv.AppendInt(b, r.ObservedGeneration, 10)
	b = append(b, `,"resource_version":`...)
	b = strconv.AppendInt(b, r.ResourceVersion, 10)
	b = append(b, `,"conditions":`...)
	if b, ok = AppendConditions(b, r.Conditions); !ok {
		return b, false
	}
	b = append(b, `,"phase":`...)
	b = AppendString(b, r.Phase)
	b = append(b, `,"outputs":`...)
	if b, ok = appendRaw(b, r.Outputs); !ok {
		return b, false
	}
	b = append(b, `,"finalizers":`...)
	b = AppendStrings(b, r.Finalizers)
	for _, t := range []struct {
		name string
		t    *time.Time
	}{{`,"created_at":`, &r.CreatedAt}, {`,"updated_at":`, &r.UpdatedAt}, {`,"deleted_at":`, r.DeletedAt}, {`,"last_reconcile_time":`, r.LastReconcileTime}} {
		b = append(b, t.name...)
		if b, ok = appendTime(b, t.t); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// jsonSize is a good first capacity for r's document.
func jsonSize(r *Resource) int {
	n := 600 + len(r.Namespace) + len(r.Spec) + len(r.Outputs) + 200*len(r.Conditions) + 200*len(r.OwnerReferences)
	for k, v := range r.Labels {
		n += len(k) + len(v) + 6
	}
	for k, v := range r.Annotations {
		n += len(k) + len(v) + 6
	}
	for _, f := range r.Finalizers {
		n += len(f) + 3
	}
	return n
}

// appendStringMap appends m as a JSON object, keys sorted (null when nil).
func AppendStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	if len(m) == 1 {
		for k, v := range m {
			b = AppendString(b, k)
			b = append(b, ':')
			b = AppendString(b, v)
		}
		return append(b, '}')
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = append(b, ':')
		b = AppendString(b, m[k])
	}
	return append(b, '}')
}

// appendRaw appends a JSON value compacted, as encoding/json renders a
// json.RawMessage (null when nil); ok is false when it is not JSON.
func appendRaw(b, raw []byte) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, false
	}
	return buf.Bytes(), true
}

// appendTime appends t as encoding/json does (RFC 3339 with nanoseconds, in
// t's own location), null when t is nil; ok is false outside years 0-9999.
func appendTime(b []byte, t *time.Time) ([]byte, bool) {
	if t == nil {
		return append(b, "null"...), true
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// AppendString appends s as a JSON string, escaped as encoding/json escapes
// it without HTML escaping: quotes, backslashes and control characters;
// invalid UTF-8 becomes U+FFFD; U+2028 and U+2029 are escaped.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendStrings appends l as a JSON array (null when nil), as encoding/json
// renders it.
func AppendStrings(b []byte, l []string) []byte {
	if l == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}

// AppendOwnerReferences appends owner references as a JSON array (null when
// nil), as encoding/json renders them.
func AppendOwnerReferences(b []byte, l []OwnerReference) []byte {
	if l == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, o := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"uid":`...)
		b = AppendString(b, o.UID)
		b = append(b, `,"resource_type_name":`...)
		b = AppendString(b, o.ResourceTypeName)
		b = append(b, `,"resource_type_version":`...)
		b = AppendString(b, o.ResourceTypeVersion)
		b = append(b, `,"name":`...)
		b = AppendString(b, o.Name)
		if o.Controller {
			b = append(b, `,"controller":true`...)
		}
		if o.BlockOwnerDeletion {
			b = append(b, `,"block_owner_deletion":true`...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// AppendConditions appends conditions as a JSON array (null when nil), as
// encoding/json renders them; ok is false for a transition time outside
// years 0-9999.
func AppendConditions(b []byte, l []Condition) (out []byte, ok bool) {
	if l == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, c := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = AppendString(b, c.Type)
		b = append(b, `,"status":`...)
		b = AppendString(b, c.Status)
		if c.Reason != "" {
			b = append(b, `,"reason":`...)
			b = AppendString(b, c.Reason)
		}
		if c.Message != "" {
			b = append(b, `,"message":`...)
			b = AppendString(b, c.Message)
		}
		b = append(b, `,"observed_generation":`...)
		b = strconv.AppendInt(b, c.ObservedGeneration, 10)
		b = append(b, `,"last_transition_time":`...)
		if b, ok = appendTime(b, &c.LastTransitionTime); !ok {
			return b, false
		}
		b = append(b, '}')
	}
	return append(b, ']'), true
}
