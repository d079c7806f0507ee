package pgstore

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// scanDocument reads one row of resourceColumns straight into the resource's
// canonical JSON document, the same document resource.Marshal produces for
// the scanned resource, without decoding the JSON-valued columns: lists of
// thousands of resources spend their time here.
func scanDocument(row pgx.Row) (doc []byte, id int64, err error) {
	var (
		uid                                                   uuid.UUID
		name, typeName, typeVersion, status, message, phase   string
		labels, annotations, owners, spec, conditions, output []byte
		finalizers                                            []byte
		generation, observed, rv                              int64
		created, updated                                      time.Time
		deleted, reconciled                                   *time.Time
	)
	if err := row.Scan(&id, &uid, &name, &typeName, &typeVersion, &labels, &annotations,
		&owners, &spec, &status, &message, &generation, &observed, &rv,
		&conditions, &phase, &output, &finalizers, &created, &updated, &deleted, &reconciled); err != nil {
		return nil, 0, err
	}
	b := make([]byte, 0, 512+len(labels)+len(annotations)+len(owners)+len(spec)+len(conditions)+len(output)+len(finalizers))
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"uid":"`...)
	b = append(b, uid.String()...)
	b = append(b, `","name":`...)
	b = appendString(b, name)
	b = append(b, `,"resource_type_name":`...)
	b = appendString(b, typeName)
	b = append(b, `,"resource_type_version":`...)
	b = appendString(b, typeVersion)
	b = append(b, `,"labels":`...)
	b = appendCompact(b, labels, "{}")
	b = append(b, `,"annotations":`...)
	b = appendCompact(b, annotations, "{}")
	b = append(b, `,"owner_references":`...)
	b = appendCompact(b, owners, "[]")
	b = append(b, `,"spec":`...)
	b = appendCompact(b, spec, "{}")
	b = append(b, `,"status":`...)
	b = appendString(b, status)
	b = append(b, `,"status_message":`...)
	b = appendString(b, message)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, generation, 10)
	b = append(b, `,"observed_generation":`...)
	b = strconv.AppendInt(b, observed, 10)
	b = append(b, `,"resource_version":`...)
	b = strconv.AppendInt(b, rv, 10)
	b = append(b, `,"conditions":`...)
	b = appendCompact(b, conditions, "[]")
	b = append(b, `,"phase":`...)
	b = appendString(b, phase)
	b = append(b, `,"outputs":`...)
	b = appendCompact(b, output, "{}")
	b = append(b, `,"finalizers":`...)
	b = appendCompact(b, finalizers, "[]")
	b = append(b, `,"created_at":`...)
	b = appendTime(b, &created)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, &updated)
	b = append(b, `,"deleted_at":`...)
	b = appendTime(b, deleted)
	b = append(b, `,"last_reconcile_time":`...)
	b = appendTime(b, reconciled)
	b = append(b, '}')
	return b, id, nil
}

// appendCompact appends a jsonb column's text without the spaces jsonb adds.
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
