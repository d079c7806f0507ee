package strictjson

import (
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
	c := checker{data: data}
	c.value(base)
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

// checker walks a document that json.Valid accepted.
type checker struct {
	data      []byte
	i         int
	errs      []problem.FieldError
	malformed bool
}

func (c *checker) fail(path, msg string, malformed bool) {
	c.malformed = c.malformed || malformed
	if len(c.errs) < maxErrors {
		c.errs = append(c.errs, problem.FieldError{Path: path, Message: msg})
	}
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

// value checks the value at c.i, whose pointer is path.
func (c *checker) value(path string) {
	c.skipSpace()
	switch c.data[c.i] {
	case '{':
		c.object(path)
	case '[':
		c.array(path)
	case '"':
		c.str(path, false)
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
		if !NumberOK(string(c.data[start:c.i])) {
			c.fail(path, NumberRangeMessage, false)
		}
	}
}

func isNumberByte(b byte) bool {
	return b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E'
}

func (c *checker) object(path string) {
	c.i++ // {
	seen := map[string]bool{}
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
		key, ok := c.str("", true)
		child := path + "/" + EscapePointer(strings.ToValidUTF8(key, "\uFFFD"))
		if !ok {
			// Report the key's problem at the member's pointer.
			c.i = keyStart
			c.str(child, false)
		} else if seen[key] {
			c.fail(child, msgDuplicate, true)
		}
		seen[key] = true
		c.skipSpace()
		c.i++ // :
		c.value(child)
	}
}

func (c *checker) array(path string) {
	c.i++ // [
	for n := 0; ; n++ {
		c.skipSpace()
		if c.data[c.i] == ']' {
			c.i++
			return
		}
		if c.data[c.i] == ',' {
			c.i++
		}
		c.value(path + "/" + strconv.Itoa(n))
	}
}

// str reads the string at c.i and returns it decoded. It reports each
// problem at path unless quiet, and returns ok false when there was one.
func (c *checker) str(path string, quiet bool) (string, bool) {
	c.i++ // opening quote
	var b strings.Builder
	ok := true
	report := func(msg string, malformed bool) {
		ok = false
		if !quiet {
			c.fail(path, msg, malformed)
		}
	}
	for c.data[c.i] != '"' {
		ch := c.data[c.i]
		if ch != '\\' {
			if ch < utf8.RuneSelf {
				b.WriteByte(ch)
				c.i++
				continue
			}
			r, size := utf8.DecodeRune(c.data[c.i:])
			if r == utf8.RuneError && size <= 1 {
				report(msgUTF8, true)
				b.WriteByte(ch)
				c.i++
				continue
			}
			b.Write(c.data[c.i : c.i+size])
			c.i += size
			continue
		}
		esc := c.data[c.i+1]
		if esc != 'u' {
			b.WriteByte(unescape(esc))
			c.i += 2
			continue
		}
		r := hex4(c.data[c.i+2 : c.i+6])
		c.i += 6
		switch {
		case r == 0:
			report(msgNUL, false)
			b.WriteByte(0)
		case utf16.IsSurrogate(r):
			if r < 0xdc00 && c.i+6 <= len(c.data) && c.data[c.i] == '\\' && c.data[c.i+1] == 'u' {
				if lo := hex4(c.data[c.i+2 : c.i+6]); lo >= 0xdc00 && lo <= 0xdfff {
					b.WriteRune(utf16.DecodeRune(r, lo))
					c.i += 6
					continue
				}
			}
			report(msgSurrogate, true)
		default:
			b.WriteRune(r)
		}
	}
	c.i++ // closing quote
	return b.String(), ok
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
