package names

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Event types (Events in the Kubernetes sense: records attached to a
// resource, apart from the change stream).
const (
	// EventNormal is an event that reports progress.
	EventNormal = "Normal"
	// EventWarning is an event that reports a problem.
	EventWarning = "Warning"
)

// Bounds of an Event.
const (
	// MaxEventReasonLength bounds an Event's reason.
	MaxEventReasonLength = 128
	// MaxEventMessageBytes bounds an Event's message.
	MaxEventMessageBytes = 1024
	// MaxEventSourceBytes bounds an Event's source (the emitting component).
	MaxEventSourceBytes = 253
)

// ReconcilerEventSourcePrefix begins the source of the Events a reconciler
// records with its results (reconciler/<name>, set by the store from the
// lease holder): reserved, so that a client cannot pass its Events off as a
// reconciler's (until identities make the source exact).
const ReconcilerEventSourcePrefix = "reconciler/"

// EventSource checks the source a client gives an Event: at most
// MaxEventSourceBytes, and not of the reserved form reconciler/….
func EventSource(path, s string) *FieldError {
	switch {
	case len(s) > MaxEventSourceBytes:
		return &FieldError{Path: path, Message: fmt.Sprintf("source is %d bytes, more than %d", len(s), MaxEventSourceBytes)}
	case strings.HasPrefix(s, ReconcilerEventSourcePrefix):
		return &FieldError{Path: path, Message: fmt.Sprintf("source %q is reserved: %s<name> is set by the store for the Events a reconciler records with its results", truncate(s), ReconcilerEventSourcePrefix)}
	}
	return nil
}

// EventType checks an Event's type: Normal or Warning.
func EventType(path, t string) *FieldError {
	if t != EventNormal && t != EventWarning {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is not an event type: Normal or Warning", truncate(t))}
	}
	return nil
}

// EventReason checks an Event's reason: a CamelCase word such as
// TenantDeleted, at most 128 letters and digits.
func EventReason(path, r string) *FieldError {
	if !matchEventReason(r) {
		return &FieldError{Path: path, Message: fmt.Sprintf("%q is not an event reason: an upper-case letter, then letters and digits, at most %d (TenantDeleted)", truncate(r), MaxEventReasonLength)}
	}
	return nil
}

// EventMessage checks an Event's message: required, at most
// MaxEventMessageBytes bytes of valid UTF-8.
func EventMessage(path, m string) *FieldError {
	switch {
	case m == "":
		return &FieldError{Path: path, Message: "message is required"}
	case len(m) > MaxEventMessageBytes:
		return &FieldError{Path: path, Message: fmt.Sprintf("message is %d bytes, more than %d", len(m), MaxEventMessageBytes)}
	case !utf8.ValidString(m):
		return &FieldError{Path: path, Message: "message is not valid UTF-8"}
	}
	return nil
}

// TruncateEventMessage cuts m to at most MaxEventMessageBytes bytes on a
// character boundary, marking the cut with "...", for emitters that would
// rather shorten a long message than lose the event.
func TruncateEventMessage(m string) string {
	if len(m) <= MaxEventMessageBytes {
		return m
	}
	cut := MaxEventMessageBytes - 3
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + "..."
}
