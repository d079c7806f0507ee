package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Equal reports whether a and b are the same JSON value: objects with the
// same keys and equal values in any order, arrays with equal elements in
// order, numbers by value (1e2, 100 and 100.0 are equal), strings and other
// scalars exactly. A document that does not decode equals nothing.
func Equal(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	if errA != nil || errB != nil {
		return false
	}
	return matchValues(va, vb, false)
}

// Covers reports whether the JSON value have contains want: every member of
// an object in want is in have with a covering value (have may hold more
// members: defaults a server filled in, keys another writer added), arrays
// are of the same length and cover element by element, numbers are equal by
// value, other values equal. Documents that do not decode cover nothing.
// The tenant reconciler and HttpSource use it to tell drift from defaults.
func Covers(have, want []byte) bool {
	vh, errH := decode(have)
	vw, errW := decode(want)
	if errH != nil || errW != nil {
		return false
	}
	return matchValues(vh, vw, true)
}

// decode parses one JSON value, numbers as json.Number.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// matchValues compares decoded JSON values: equal, or, with cover, a
// covering b (objects in a may hold members b lacks; everything else as
// equal).
func matchValues(a, b any, cover bool) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || (!cover && len(a) != len(b)) {
			return false
		}
		for k, vb := range b {
			va, ok := a[k]
			if !ok || !matchValues(va, vb, cover) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !matchValues(a[i], b[i], cover) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		if a == b {
			return true
		}
		if !NumberOK(string(a)) || !NumberOK(string(b)) {
			return false
		}
		return canonicalNumber(string(a)) == canonicalNumber(string(b))
	default:
		return a == b
	}
}
