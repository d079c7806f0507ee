package storage

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
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
	b = resource.AppendString(b, d.Namespace)
	b = append(b, `,"name":`...)
	b = resource.AppendString(b, d.Name)
	b = append(b, `,"resource_type_name":`...)
	b = resource.AppendString(b, d.TypeName)
	b = append(b, `,"resource_type_version":`...)
	b = resource.AppendString(b, d.TypeVersion)
	b = append(b, `,"labels":`...)
	b = appendCompact(b, d.Labels, "{}")
	b = append(b, `,"annotations":`...)
	b = appendCompact(b, d.Annotations, "{}")
	b = append(b, `,"owner_references":`...)
	b = appendCompact(b, d.Owners, "[]")
	b = append(b, `,"spec":`...)
	b = appendCompact(b, d.Spec, "{}")
	b = append(b, `,"status":`...)
	b = resource.AppendString(b, d.Status)
	b = append(b, `,"status_message":`...)
	b = resource.AppendString(b, d.Message)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, d.Generation, 10)
	b = append(b, `,"observed_generation":`...)
	b = strconv.AppendInt(b, d.Observed, 10)
	b = append(b, `,"resource_version":`...)
	b = strconv.AppendInt(b, d.ResourceVersion, 10)
	b = append(b, `,"conditions":`...)
	b = appendCompact(b, d.Conditions, "[]")
	b = append(b, `,"phase":`...)
	b = resource.AppendString(b, d.Phase)
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
	if len(b) == 0 {
		return b
	}
	return appendStoredCompact(make([]byte, 0, len(b)), b)
}

// appendCompact appends a stored JSON value without insignificant spaces
// (empty when there is none).
func appendCompact(b, raw []byte, empty string) []byte {
	if len(raw) == 0 {
		return append(b, empty...)
	}
	return appendStoredCompact(b, raw)
}

// appendStoredCompact appends raw, a JSON value the store wrote and read
// back (valid: jsonb parsed it, or the store encoded it), without the
// whitespace outside its strings. It does not validate raw, as
// json.Compact does (most of a list's time went there), and copies each
// string whole: on valid JSON the two agree (FuzzStoredCompact).
func appendStoredCompact(b, raw []byte) []byte {
	for len(raw) > 0 {
		// Between strings: structure, numbers and literals, short.
		q := bytes.IndexByte(raw, '"')
		if q < 0 {
			q = len(raw)
		}
		for _, c := range raw[:q] {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				b = append(b, c)
			}
		}
		raw = raw[q:]
		if len(raw) == 0 {
			break
		}
		// A string, to its closing quote: the first one not escaped
		// (after an even run of backslashes).
		end := 1
		for {
			n := bytes.IndexByte(raw[end:], '"')
			if n < 0 {
				end = len(raw)
				break
			}
			end += n
			k := end - 1
			for k > 0 && raw[k] == '\\' {
				k--
			}
			end++
			if (end-2-k)%2 == 0 {
				break
			}
		}
		b = append(b, raw[:end]...)
		raw = raw[end:]
	}
	return b
}

func appendTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
