package queueinput

import (
	"strings"
	"testing"
	"time"
)

// The settle table: malformed is dead-lettered at once, definitive answers
// are recorded, answers a retry may change are retried with a doubling
// delay and dead-lettered on the last delivery.
func TestSettle(t *testing.T) {
	const base, maxDelay = time.Second, 5 * time.Second
	for _, tc := range []struct {
		name      string
		a         Answer
		delivered int
		verb      verb
		delay     time.Duration
		reason    string
	}{
		{"malformed", Answer{Status: 400, Malformed: true, Detail: "not YAML"}, 1, deadLetter, 0, "malformed: not YAML"},
		{"created", Answer{Status: 201}, 1, record, 0, ""},
		{"unchanged on the last delivery", Answer{Status: 200}, 5, record, 0, ""},
		{"invalid spec", Answer{Status: 400}, 1, record, 0, ""},
		{"denied", Answer{Status: 403}, 1, record, 0, ""},
		{"conflict", Answer{Status: 409}, 1, record, 0, ""},
		{"not found", Answer{Status: 404}, 1, record, 0, ""},
		{"unavailable first", Answer{Status: 503}, 1, retry, time.Second, ""},
		{"unavailable third", Answer{Status: 503}, 3, retry, 4 * time.Second, ""},
		{"unavailable fourth, capped", Answer{Status: 503}, 4, retry, 5 * time.Second, ""},
		{"internal", Answer{Status: 500}, 2, retry, 2 * time.Second, ""},
		{"timeout", Answer{Status: 408}, 1, retry, time.Second, ""},
		{"too many", Answer{Status: 429}, 1, retry, time.Second, ""},
		{"unavailable last", Answer{Status: 503, Detail: "store down"}, 5, deadLetter, 0, "gave up after 5 deliveries: status 503: store down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := settle(tc.a, tc.delivered, 5, base, maxDelay)
			if got.verb != tc.verb || got.delay != tc.delay || !strings.HasPrefix(got.reason, tc.reason) {
				t.Fatalf("settle = %v %v %q, want %v %v %q", got.verb, got.delay, got.reason, tc.verb, tc.delay, tc.reason)
			}
		})
	}
}

func TestDigestDistinguishesOperationAndDryRun(t *testing.T) {
	body := []byte("kind: Resource")
	a, b, c := digest(OpApply, "", body), digest(OpDelete, "", body), digest(OpApply, "true", body)
	if a == b || a == c || a != digest(OpApply, "", []byte("kind: Resource")) {
		t.Fatal("digest must tell operation, dry run and body apart, and only them")
	}
}
