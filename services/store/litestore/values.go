package litestore

// How values are stored: times as INTEGER microseconds since the Unix epoch
// (UTC), JSON as compact TEXT, booleans as INTEGER.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// micros is t as stored.
func micros(t time.Time) int64 { return t.UnixMicro() }

// microsOrNil is t as stored, NULL when nil.
func microsOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

// timeOf reads a stored time.
func timeOf(us int64) time.Time { return time.UnixMicro(us).UTC() }

// timeOrNil reads a nullable stored time.
func timeOrNil(us sql.NullInt64) *time.Time {
	if !us.Valid {
		return nil
	}
	t := timeOf(us.Int64)
	return &t
}

// jsonText is v as stored: compact JSON text (encoding/json's, keys of maps
// sorted).
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %T: %w", v, err)
	}
	return string(b), nil
}

// decodeJSON reads stored JSON text into v; what to do with empty text is
// the caller's (Normalize fills the empties).
func decodeJSON(text string, v any) error {
	if text == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		return fmt.Errorf("decode stored %T: %w", v, err)
	}
	return nil
}
