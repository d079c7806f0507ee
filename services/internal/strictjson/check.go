package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/no8s/no8s/services/internal/problem"
)

// maxErrors bounds the locations one check reports.
const maxErrors = 50

// Messages of the field errors.
const (
	msgUTF8      = "not valid UTF-8"
	msgSurrogate = `a lone UTF-16 surrogate escape (like "\ud800") is not a character`
	msgNUL       = `NUL characters (\u0000) are not allowed`
	msgDuplicate = "duplicate key: each key may appear once in an object"
)

// Check checks data, a JSON document, against the package's rules. Each
// violation is a field error whose path is base followed by the JSON pointer
// of the offending value or key (base "" for a request body, "/spec" for a
// spec). Syntax errors are not its business: for data that is not valid JSON
// it returns nil, and the caller's decoder reports the syntax error.
//
// The error is an Invalid *problem.Error: code malformed_json when the
// document is not well-formed UTF-8 JSON with unique keys, invalid when only
// NULs or numbers are refused.
func Check(data []byte, base string) *problem.Error {
	if !json.Valid(data) {
		return nil
	}
	var path [16]token
	var keys [32][]byte
	c := checker{data: data, base: base, path: path[:0], keys: keys[:0]}
	c.value()
	if len(c.errs) == 0 {
		return nil
	}
	code := problem.CodeInvalid
	if c.malformed {
		code = problem.CodeMalformedJSON
	}
	first := c.errs[0]
	detail := fmt.Sprintf("%s: %s", displayPath(first.Path), first.Message)
	if len(c.errs) > 1 {
		detail += fmt.Sprintf(" (and %d more)", len(c.errs)-1)
	}
	return problem.New(problem.Invalid, code, "%s", detail).WithFields(c.errs...)
}

func displayPath(p string) string {
	if p == "" {
		return "the document"
	}
	return p
}

// checker walks a document that json.Valid accepted. It allocates nothing
// on a clean document: keys are compared as slices of data (decoded only when
// they hold an escape), and a value's JSON pointer is rendered only when the
// value fails (from the stack of tokens leading to it).
type checker struct {
	data      []byte
	i         int
	base      string
	errs      []problem.FieldError
	malformed bool
	// path is the stack of tokens from the document to the current value.
	path []token
	// keys holds the keys of the objects being walked, innermost last.
	keys [][]byte
	// buf receives decoded strings that hold escapes.
	buf []byte
}

// token is one step of a JSON pointer: an object member, named by the
// offset of its key's opening quote, or an array index.
type token struct {
	key   int
	index int
	isKey bool
}

// pointer renders the current path as base followed by a JSON pointer.
func (c *checker) pointer() string {
	var b strings.Builder
	b.WriteString(c.base)
	for _, t := range c.path {
		b.WriteByte('/')
		if !t.isKey {
			b.WriteString(strconv.Itoa(t.index))
			continue
		}
		// Decode the key again, quietly, on a scratch checker.
		k := checker{data: c.data, i: t.key}
		raw, _ := k.str(false)
		b.WriteString(EscapePointer(strings.ToValidUTF8(string(raw), "\uFFFD")))
	}
	return b.String()
}

// fail records a violation at the current path, once: a string with
// several bad bytes is one error, not one per byte.
func (c *checker) fail(msg string, malformed bool) {
	c.malformed = c.malformed || malformed
	if len(c.errs) >= maxErrors {
		return
	}
	fe := problem.FieldError{Path: c.pointer(), Message: msg}
	if n := len(c.errs); n > 0 && c.errs[n-1] == fe {
		return
	}
	c.errs = append(c.errs, fe)
}

func (c *checker) skipSpace() {
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value checks the value at c.i, whose pointer is the current path.
func (c *checker) value() {
	c.skipSpace()
	switch c.data[c.i] {
	case '{':
		c.object()
	case '[':
		c.array()
	case '"':
		c.str(true)
	case 't':
		c.i += len("true")
	case 'f':
		c.i += len("false")
	case 'n':
		c.i += len("null")
	default:
		start := c.i
		for c.i < len(c.data) && isNumberByte(c.data[c.i]) {
			c.i++
		}
		if !numberBytesOK(c.data[start:c.i]) {
			c.fail(NumberRangeMessage, false)
		}
	}
}

// numberBytesOK is NumberOK on a literal in the document; plain literals
// (the common case) are decided without converting them.
func numberBytesOK(lit []byte) bool {
	return plainNumber(lit) || NumberOK(string(lit))
}

func isNumberByte(b byte) bool {
	return b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E'
}

// smallObject is the member count up to which duplicate keys are found by
// comparing with each earlier key rather than through a map.
const smallObject = 16

func (c *checker) object() {
	c.i++ // {
	first := len(c.keys)
	var seen map[string]bool
	defer func() { c.keys = c.keys[:first] }()
	for {
		c.skipSpace()
		if c.data[c.i] == '}' {
			c.i++
			return
		}
		if c.data[c.i] == ',' {
			c.i++
			c.skipSpace()
		}
		keyStart := c.i
		c.path = append(c.path, token{key: keyStart, isKey: true})
		key, ok := c.str(false)
		if !ok {
			// Report the key's problem at the member's pointer.
			c.i = keyStart
			c.str(true)
		} else {
			members := c.keys[first:]
			dup := false
			switch {
			case seen != nil:
				dup = seen[string(key)]
			case len(members) < smallObject:
				for _, k := range members {
					if bytes.Equal(k, key) {
						dup = true
						break
					}
				}
			default:
				seen = make(map[string]bool, 2*smallObject)
				for _, k := range members {
					seen[string(k)] = true
				}
				dup = seen[string(key)]
			}
			if dup {
				c.fail(msgDuplicate, true)
			}
			if seen != nil {
				seen[string(key)] = true
			}
		}
		// A key decoded into buf is copied: buf is reused by the next string.
		if len(key) > 0 && len(c.buf) > 0 && &key[0] == &c.buf[0] {
			key = bytes.Clone(key)
		}
		c.keys = append(c.keys, key)
		c.skipSpace()
		c.i++ // :
		c.value()
		c.path = c.path[:len(c.path)-1]
	}
}

func (c *checker) array() {
	c.i++ // [
	c.path = append(c.path, token{})
	defer func() { c.path = c.path[:len(c.path)-1] }()
	for n := 0; ; n++ {
		c.skipSpace()
		if c.data[c.i] == ']' {
			c.i++
			return
		}
		if c.data[c.i] == ',' {
			c.i++
		}
		c.path[len(c.path)-1].index = n
		c.value()
	}
}

// str reads the string at c.i and returns it decoded: a slice of data when
// it holds no escape, else a slice of c.buf (valid until the next call). It
// reports each problem at the current path when report is set, and returns
// ok false when there was one.
func (c *checker) str(report bool) ([]byte, bool) {
	c.i++ // opening quote
	start := c.i
	ok := true
	problem := func(msg string, malformed bool) {
		ok = false
		if report {
			c.fail(msg, malformed)
		}
	}
	// Fast path: no escape.
	for {
		ch := c.data[c.i]
		if ch == '"' {
			c.i++
			return c.data[start : c.i-1], ok
		}
		if ch == '\\' {
			break
		}
		if ch < utf8.RuneSelf {
			c.i++
			continue
		}
		r, size := utf8.DecodeRune(c.data[c.i:])
		if r == utf8.RuneError && size <= 1 {
			problem(msgUTF8, true)
		}
		c.i += size
	}
	b := append(c.buf[:0], c.data[start:c.i]...)
	for c.data[c.i] != '"' {
		ch := c.data[c.i]
		if ch != '\\' {
			if ch < utf8.RuneSelf {
				b = append(b, ch)
				c.i++
				continue
			}
			r, size := utf8.DecodeRune(c.data[c.i:])
			if r == utf8.RuneError && size <= 1 {
				problem(msgUTF8, true)
			}
			b = append(b, c.data[c.i:c.i+size]...)
			c.i += size
			continue
		}
		esc := c.data[c.i+1]
		if esc != 'u' {
			b = append(b, unescape(esc))
			c.i += 2
			continue
		}
		r := hex4(c.data[c.i+2 : c.i+6])
		c.i += 6
		switch {
		case r == 0:
			problem(msgNUL, false)
			b = append(b, 0)
		case utf16.IsSurrogate(r):
			if r < 0xdc00 && c.i+6 <= len(c.data) && c.data[c.i] == '\\' && c.data[c.i+1] == 'u' {
				if lo := hex4(c.data[c.i+2 : c.i+6]); lo >= 0xdc00 && lo <= 0xdfff {
					b = utf8.AppendRune(b, utf16.DecodeRune(r, lo))
					c.i += 6
					continue
				}
			}
			problem(msgSurrogate, true)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	c.i++ // closing quote
	c.buf = b
	return b, ok
}

func unescape(esc byte) byte {
	switch esc {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return esc // " \ /
}

func hex4(h []byte) rune {
	var r rune
	for _, ch := range h {
		r <<= 4
		switch {
		case ch >= '0' && ch <= '9':
			r |= rune(ch - '0')
		case ch >= 'a' && ch <= 'f':
			r |= rune(ch-'a') + 10
		case ch >= 'A' && ch <= 'F':
			r |= rune(ch-'A') + 10
		}
	}
	return r
}

// EscapePointer escapes a key as a JSON pointer token (RFC 6901).
func EscapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// CheckString checks one decoded string that is stored as text (a
// description, an annotation value): it must be valid UTF-8 without NUL
// characters. It returns the violation at path, or nil.
func CheckString(path, s string) *problem.FieldError {
	switch {
	case !utf8.ValidString(s):
		return &problem.FieldError{Path: path, Message: msgUTF8}
	case strings.IndexByte(s, 0) >= 0:
		return &problem.FieldError{Path: path, Message: msgNUL}
	}
	return nil
}
