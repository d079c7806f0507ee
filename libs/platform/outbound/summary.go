package outbound

import (
	"errors"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ExcerptLength is the most characters of a peer's text body a Summary
// shows.
const ExcerptLength = 80

// Summary says what a peer answered without echoing it: the status, the
// content type, the size and, for a text/plain or text/html body only, a
// short sanitised excerpt (markup dropped, blanks folded, anything that
// looks like a credential replaced: a value after a word such as token,
// secret, password, key or authorization, and any run of 20 or more
// letters, digits and +/_=- that reads like a key or token). A JSON body,
// or any other type, shows no excerpt: its fields may be a peer's
// internals. What a status, an Event or a log says of a failed peer is
// this.
func Summary(status string, contentType string, body []byte) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || contentType == "" {
		mt = "no content type"
	}
	out := fmt.Sprintf("%s (%s, %d bytes)", status, mt, len(body))
	if mt != "text/plain" && mt != "text/html" {
		return out
	}
	text := string(body)
	if mt == "text/html" {
		text = markup.ReplaceAllString(text, " ")
	}
	if ex := Sanitize(text); ex != "" {
		out += ": " + ex
	}
	return out
}

var (
	markup = regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]*>`)
	// credentialAfterWord matches a word that names a credential and the
	// value after it (token=abc, "password": "x", Authorization: Bearer x).
	credentialAfterWord = regexp.MustCompile(`(?i)((?:token|secret|passw(?:or)?d|pwd|api[-_]?key|key|authorization|bearer|basic|cookie|session|credential)s?["']?\s*[:=]?\s*["']?)(?:bearer\s+|basic\s+)?[^\s"',;&]+`)
	// tokenLike matches a long run that reads like a key or a token.
	tokenLike = regexp.MustCompile(`[A-Za-z0-9+/_=\-]{20,}`)
)

// Sanitize folds blanks in text, replaces what looks like a credential with
// [redacted] and cuts the result to ExcerptLength characters (on a
// character boundary, "…" marking the cut).
func Sanitize(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return -1
		}
		return r
	}, text)
	text = credentialAfterWord.ReplaceAllString(text, "${1}[redacted]")
	text = tokenLike.ReplaceAllString(text, "[redacted]")
	if utf8.RuneCountInString(text) > ExcerptLength {
		r := []rune(text)
		text = string(r[:ExcerptLength]) + "…"
	}
	return text
}

// errNotHTTP replaces a transport error that quotes a peer's bytes.
var errNotHTTP = errors.New("the peer's answer is not HTTP")

// TransportError is err (an http.Client's) fit to show: Go's transport
// quotes the first bytes of an answer that is not HTTP (`malformed HTTP
// response "INFO {\"server_id\"…`: a NATS port, a database); such an error
// becomes "<method> <url>: the peer's answer is not HTTP", without them,
// and so does the transport's error for a peer that speaks before it is
// asked (readLoopPeekFailLocked: a NATS server's INFO line). Other
// transport errors (refused, reset, timeouts, TLS) name no peer
// bytes and are returned as they are.
func TransportError(err error) error {
	if err == nil || !strings.Contains(err.Error(), "malformed HTTP") && !strings.Contains(err.Error(), "readLoopPeekFailLocked") {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, ue.URL, errNotHTTP)
	}
	return errNotHTTP
}
