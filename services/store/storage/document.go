package storage

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// DocumentFields are a resource's stored columns as a backend scanned them,
// the JSON-valued ones still in their stored text: AppendDocument renders
// them as the resource's canonical JSON document (the one resource.Marshal
// produces) without decoding that JSON. Lists of thousands of resources
// spend their time here.
type DocumentFields struct {
	ID                                    int64
	UID, Namespace, Name                  string
	TypeName, TypeVersion                 string
	Labels, Annotations, Owners, Spec     []byte
	Status, Message                       string
	Generation, Observed, ResourceVersion int64
	Conditions                            []byte
	Phase                                 string
	Outputs, Finalizers                   []byte
	Created, Updated                      time.Time
	Deleted, Reconciled                   *time.Time
}

// AppendDocument appends the canonical JSON document of d to b.
func (d *DocumentFields) AppendDocument(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, d.ID, 10)
	b = append(b, `,"uid":"`...)
	b = append(b, d.UID...)
	b = append(b, `","namespace":`...)
	b = appendString(b, d.Namespace)
	b = append(b, `,"name":`...)
	b = appendString(b, d.Name)
	b = append(b, `,"resource_type_name":`...)
	b = appendString(b, d.TypeName)
	b = append(b, `,"resource_type_version":`...)
	b = appendString(b, d.TypeVersion)
	b = append(b, `,"labels":`...)
	b = appendCompact(b, d.Labels, "{}")
	b = append(b, `,"annotations":`...)
	b = appendCompact(b, d.Annotations, "{}")
	b = append(b, `,"owner_references":`...)
	b = appendCompact(b, d.Owners, "[]")
	b = append(b, `,"spec":`...)
	b = appendCompact(b, d.Spec, "{}")
	b = append(b, `,"status":`...)
	b = appendString(b, d.Status)
	b = append(b, `,"status_message":`...)
	b = appendString(b, d.Message)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, d.Generation, 10)
	b = append(b, `,"observed_generation":`...)
	b = strconv.AppendInt(b, d.Observed, 10)
	b = append(b, `,"resource_version":`...)
	b = strconv.AppendInt(b, d.ResourceVersion, 10)
	b = append(b, `,"conditions":`...)
	b = appendCompact(b, d.Conditions, "[]")
	b = append(b, `,"phase":`...)
	b = appendString(b, d.Phase)
	b = append(b, `,"outputs":`...)
	b = appendCompact(b, d.Outputs, "{}")
	b = append(b, `,"finalizers":`...)
	b = appendCompact(b, d.Finalizers, "[]")
	b = append(b, `,"created_at":`...)
	b = appendTime(b, &d.Created)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, &d.Updated)
	b = append(b, `,"deleted_at":`...)
	b = appendTime(b, d.Deleted)
	b = append(b, `,"last_reconcile_time":`...)
	b = appendTime(b, d.Reconciled)
	return append(b, '}')
}

// Size is a good first capacity for d's document.
func (d *DocumentFields) Size() int {
	return 512 + len(d.Labels) + len(d.Annotations) + len(d.Owners) + len(d.Spec) + len(d.Conditions) + len(d.Outputs) + len(d.Finalizers)
}

// CompactJSON removes the insignificant spaces of a stored JSON value (as
// jsonb's text form adds).
func CompactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return json.RawMessage(b)
	}
	return buf.Bytes()
}

// appendCompact appends a stored JSON value without insignificant spaces
// (empty when there is none).
func appendCompact(b, raw []byte, empty string) []byte {
	if len(raw) == 0 {
		return append(b, empty...)
	}
	var out bytes.Buffer
	out.Grow(len(raw))
	if err := json.Compact(&out, raw); err != nil {
		return append(b, raw...)
	}
	return append(b, out.Bytes()...)
}

func appendTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendString appends s as a JSON string, escaping as encoding/json does
// without HTML escaping.
func appendString(b []byte, s string) []byte {
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
