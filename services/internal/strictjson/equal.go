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
	return equalValues(va, vb)
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
	return coversValue(vh, vw)
}

func coversValue(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !coversValue(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !coversValue(h[i], w[i]) {
				return false
			}
		}
		return true
	}
	return equalValues(have, want)
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

func equalValues(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !equalValues(va, vb) {
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
			if !equalValues(a[i], b[i]) {
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
