package secret

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
)

// Redacted is what Redact puts in place of a secret.
const Redacted = "[redacted]"

// minRedact is the shortest secret Redact looks for: shorter ones would
// redact ordinary words.
const minRedact = 4

// Forms are the ways a secret can appear in text a peer or a library sends
// back: as written, base64 (standard and URL alphabets, padded or not, of
// the secret and of "Bearer <secret>"), URL-escaped (query and path) and
// JSON-escaped. Secrets shorter than 4 bytes have none.
func (v Value) Forms() []string {
	s := string(v.b)
	if len(s) < minRedact {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if len(f) >= minRedact && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	add(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		add(strings.TrimRight(enc.EncodeToString(v.b), "="))
		add(strings.TrimRight(enc.EncodeToString([]byte("Bearer "+s)), "="))
	}
	add(url.QueryEscape(s))
	add(url.PathEscape(s))
	if j, err := json.Marshal(s); err == nil {
		add(string(j[1 : len(j)-1]))
	}
	return out
}

// Redact replaces every form (Value.Forms) of every one of values in s with
// Redacted: what goes into a condition, an Event, a history row, an output
// or a log from text that a remote service or a library made (an error
// body that echoes the token, a URL error) passes through it first.
func Redact(s string, values ...Value) string {
	for _, v := range values {
		for _, f := range v.Forms() {
			s = strings.ReplaceAll(s, f, Redacted)
		}
	}
	return s
}

// RedactError is err with every form of values redacted from its message;
// it still wraps err (errors.Is and errors.As see through it). nil stays
// nil.
func RedactError(err error, values ...Value) error {
	if err == nil {
		return nil
	}
	return redactedError{msg: Redact(err.Error(), values...), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
