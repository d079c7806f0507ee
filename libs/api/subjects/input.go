package subjects

import "time"

// The queue input: clients apply and delete resources by publishing no8s
// documents on NATS, beside the HTTP API (docs/queue-input.md). The
// api-gateway serves it; with several gateways, each message is handled by
// one of them.
//
// Request-reply (core NATS): a request on InputRequestApply or
// InputRequestDelete is answered by one gateway of the queue group
// InputQueueGroup with the HTTP API's status (InputStatusHeader) and body.
//
// Fire-and-forget (JetStream): a message on InputQueueApply or
// InputQueueDelete, kept in the work-queue stream InputStream and consumed
// through the one durable consumer InputConsumer that every gateway shares,
// carries a client idempotency key (InputKeyHeader). Its outcome is
// published on InputOutcome(key) (stream InputOutcomesStream); keys are
// remembered in the KV bucket InputKeysBucket for InputKeysTTL. A message
// that cannot be handled goes to InputDead (stream InputDeadStream) with
// the reason, after at most InputMaxDeliver deliveries.
const (
	// InputRequestPrefix prefixes the request subjects.
	InputRequestPrefix = "no8s.input.request"
	// InputRequestApply takes a request whose reply is the apply's answer.
	InputRequestApply = InputRequestPrefix + ".apply"
	// InputRequestDelete takes a request whose reply is the delete's answer.
	InputRequestDelete = InputRequestPrefix + ".delete"
	// InputQueueGroup is the queue group the gateways answer requests in.
	InputQueueGroup = "no8s-gateway"

	// InputStream is the work-queue stream of fire-and-forget messages.
	InputStream = "NO8S_INPUT"
	// InputQueuePrefix prefixes the fire-and-forget subjects.
	InputQueuePrefix = "no8s.input.queue"
	// InputQueueApply takes documents to apply.
	InputQueueApply = InputQueuePrefix + ".apply"
	// InputQueueDelete takes documents to delete.
	InputQueueDelete = InputQueuePrefix + ".delete"
	// InputQueueAll matches both (the stream's subject filter).
	InputQueueAll = InputQueuePrefix + ".>"
	// InputConsumer is the durable consumer every gateway pulls from.
	InputConsumer = "no8s-gateway"
	// InputMaxAge drops fire-and-forget messages nobody consumed for this
	// long.
	InputMaxAge = 24 * time.Hour

	// InputOutcomesStream keeps the outcomes of fire-and-forget messages.
	InputOutcomesStream = "NO8S_INPUT_OUTCOMES"
	// InputOutcomePrefix prefixes the outcome subjects:
	// no8s.input.outcome.<idempotency key>.
	InputOutcomePrefix = "no8s.input.outcome"
	// InputOutcomesAll matches every outcome subject.
	InputOutcomesAll = InputOutcomePrefix + ".>"
	// InputOutcomesMaxAge is how long outcomes are kept.
	InputOutcomesMaxAge = 24 * time.Hour

	// InputDeadStream keeps the dead letters.
	InputDeadStream = "NO8S_INPUT_DEAD"
	// InputDead is the dead-letter subject.
	InputDead = "no8s.input.dead"
	// InputDeadMaxAge is how long dead letters are kept.
	InputDeadMaxAge = 7 * 24 * time.Hour

	// InputKeysBucket is the KV bucket of idempotency keys: key = the
	// client's key, value = the body's digest and, once handled, the
	// outcome.
	InputKeysBucket = "NO8S_INPUT_KEYS"
	// InputKeysTTL is how long a key is remembered after its last change.
	InputKeysTTL = 24 * time.Hour

	// InputMaxDeliver is how many times a fire-and-forget message is
	// delivered at most: one the backends could not handle (503) is
	// retried until then, then dead-lettered; a delivery beyond it (the
	// gateways handling it kept stopping) is dead-lettered unhandled.
	InputMaxDeliver = 5
	// InputMaxKeyLength bounds an idempotency key.
	InputMaxKeyLength = 128
)

// InputOutcome is the subject of the outcomes of the messages carrying
// idempotency key key.
func InputOutcome(key string) string { return InputOutcomePrefix + "." + key }

// Headers of the queue input's messages.
const (
	// InputKeyHeader carries the client's idempotency key
	// ([A-Za-z0-9_-], 1 to InputMaxKeyLength characters); required on
	// fire-and-forget messages.
	InputKeyHeader = "No8s-Idempotency-Key"
	// InputDryRunHeader "true" runs everything and stores nothing (as
	// ?dry_run=true).
	InputDryRunHeader = "No8s-Dry-Run"
	// InputPropagationPolicyHeader is a delete's propagation policy:
	// Background (the default), Foreground or Orphan (as
	// ?propagation_policy=).
	InputPropagationPolicyHeader = "No8s-Propagation-Policy"
	// InputStatusHeader carries the HTTP status of a reply or an outcome.
	InputStatusHeader = "No8s-Status"
	// InputOperationHeader says what an outcome or dead letter was asked
	// for: apply or delete.
	InputOperationHeader = "No8s-Operation"
	// InputDuplicateHeader "true" marks an outcome that repeats the
	// remembered outcome of its key for a later copy of the message.
	InputDuplicateHeader = "No8s-Duplicate"
	// InputSequenceHeader carries the stream sequence of the message an
	// outcome or dead letter is about.
	InputSequenceHeader = "No8s-Input-Sequence"
	// InputReasonHeader says why a message was dead-lettered.
	InputReasonHeader = "No8s-Dead-Reason"
	// InputDeliveriesHeader says how often a dead letter was delivered.
	InputDeliveriesHeader = "No8s-Deliveries"
	// InputSubjectHeader is the subject a dead letter was published on.
	InputSubjectHeader = "No8s-Subject"
)

// ValidInputKey reports whether key may be an idempotency key: 1 to
// InputMaxKeyLength characters of [A-Za-z0-9_-] (a subject token and a KV
// key as it is).
func ValidInputKey(key string) bool {
	if key == "" || len(key) > InputMaxKeyLength {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
