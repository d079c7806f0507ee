package queueinput

import (
	"context"
	"net/http"

	"github.com/no8s/no8s/libs/api/subjects"
)

// Op is what a message asks for.
type Op string

// The operations of the queue input.
const (
	OpApply  Op = "apply"
	OpDelete Op = "delete"
)

// opOf is the operation a subject names; "" for any other subject.
func opOf(subject string) Op {
	switch subject {
	case subjects.InputRequestApply, subjects.InputQueueApply:
		return OpApply
	case subjects.InputRequestDelete, subjects.InputQueueDelete:
		return OpDelete
	}
	return ""
}

// Request is one message for the Executor.
type Request struct {
	Op Op
	// Document is the message body: one no8s document (YAML or JSON).
	Document []byte
	// DryRun is the No8s-Dry-Run header as sent ("" when absent).
	DryRun string
	// PropagationPolicy is a delete's No8s-Propagation-Policy header as
	// sent ("" when absent: Background).
	PropagationPolicy string
	// RequestID identifies the request in logs and answers.
	RequestID string
	// Authorization is the message's Authorization header ("Bearer
	// <token>"), checked as the HTTP API checks it.
	Authorization string
	// TraceContext is the trace the message's traceparent (and
	// tracestate) headers name, in tracing.Encode's form ("" for none):
	// the request continues it.
	TraceContext string
}

// Answer is what the HTTP API would answer: its status, the headers that
// carry meaning (X-Apply-Result, Location, X-Request-Id, Retry-After) and
// the JSON body.
type Answer struct {
	Status int
	Header map[string]string
	Body   []byte
	// Malformed marks a message that is not a request the API can take
	// (its body is not one Resource document, a header is wrong): it is
	// refused before anything runs and dead-lettered at once.
	Malformed bool
	// Detail is the error's detail when Status >= 400, for dead-letter
	// reasons and logs.
	Detail string
}

// OK reports whether the answer is a success (2xx).
func (a Answer) OK() bool { return a.Status >= 200 && a.Status < 300 }

// Executor runs requests exactly as the HTTP API runs them: the gateway
// implements it.
type Executor interface {
	// Execute runs one request and answers it as the HTTP API would.
	Execute(ctx context.Context, req Request) Answer
	// Refuse answers err (a *problem.Error) as the HTTP API would answer
	// it: for refusals the queue input makes itself (a reused key, a
	// message given up).
	Refuse(requestID string, err error) Answer
}

// retryable reports whether a retry may change the answer: the backends
// were unavailable or slow, or the gateway failed unexpectedly.
func retryable(status int) bool {
	return status >= http.StatusInternalServerError || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}
