package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error is an error answer of the server (its problem body): the HTTP
// status, the machine-readable code, the message, the offending fields and
// the request id to quote when reporting it.
type Error struct {
	// Status is the HTTP status; not part of the body.
	Status    int          `json:"-"`
	Detail    string       `json:"detail"`
	Code      string       `json:"code"`
	Errors    []FieldError `json:"errors"`
	RequestID string       `json:"request_id,omitempty"`
	// RetryAfter is the server's Retry-After, when it sent one; not part of
	// the body.
	RetryAfter time.Duration `json:"-"`
}

// Error is "Error from server (400 validation_failed): detail", then one
// line per field.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Error from server (%d %s): %s", e.Status, e.Code, e.Detail)
	for _, f := range e.Errors {
		b.WriteString("\n  ")
		if f.Path != "" {
			b.WriteString(f.Path)
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
	}
	return b.String()
}

// AsError returns the server's error answer inside err, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// IsNotFound reports whether err is the server's 404.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is the server's 409 (a name taken, or a
// resource_version precondition that failed).
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsGone reports whether err is the server's 410 or the watch's ERROR gone:
// the resume point is older than the retained history.
func IsGone(err error) bool {
	return errors.Is(err, ErrGone) || hasStatus(err, http.StatusGone)
}

// HasCode reports whether err is an error answer with the given code.
func HasCode(err error, code string) bool {
	e := AsError(err)
	return e != nil && e.Code == code
}

func hasStatus(err error, status int) bool {
	e := AsError(err)
	return e != nil && e.Status == status
}

// decodeError turns an error answer into an *Error.
func decodeError(status int, h http.Header, data []byte) *Error {
	e := &Error{Status: status}
	if json.Unmarshal(data, e) != nil || e.Detail == "" {
		e.Detail = strings.TrimSpace(string(data))
		if e.Detail == "" {
			e.Detail = http.StatusText(status)
		}
	}
	if e.Code == "" {
		e.Code = strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
	}
	if e.RequestID == "" && h != nil {
		e.RequestID = h.Get(HeaderRequestID)
	}
	if h != nil {
		e.RetryAfter = retryAfter(h.Get("Retry-After"))
	}
	return e
}
