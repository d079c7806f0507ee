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
