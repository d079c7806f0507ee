// Package queueinput is the api-gateway's queue input: clients apply and
// delete resources by publishing no8s documents on NATS (subjects and
// streams in libs/api/subjects, the contract in docs/queue-input.md). It
// owns the NATS mechanics only; what a request does is the gateway's
// (Executor), the same operation, admission path, status codes and bodies
// as the HTTP API.
//
// Request-reply: a request on subjects.InputRequestApply or
// InputRequestDelete is answered by one gateway of the queue group with the
// HTTP API's status (No8s-Status) and body.
//
// Fire-and-forget: a message on subjects.InputQueueApply or
// InputQueueDelete lands in the work-queue stream NO8S_INPUT, which every
// gateway pulls through one shared durable consumer, so each message is
// handled by one gateway at a time. Each message carries an idempotency
// key. The key is claimed in the KV bucket NO8S_INPUT_KEYS (a create, so
// of two messages with one key exactly one wins), the request runs, the
// outcome is recorded under the key and published on
// no8s.input.outcome.<key>, and only then is the message acknowledged. A
// crash anywhere in between redelivers the message; its redelivery finds
// the claim made under its own stream sequence and finishes the work
// (apply is idempotent by value, and every publish carries a message id, so
// a repeated step changes nothing). A later message with the same key and
// the same body gets the remembered outcome again (No8s-Duplicate: true);
// one with a different body gets 409 idempotency_key_reused.
//
// Settle (settle.go) is the one table that decides between recording an
// outcome, retrying and dead-lettering. Malformed messages (not exactly one
// Resource document, a missing key, a bad header) are dead-lettered at
// once with an error outcome: retrying cannot fix them. Answers that a
// retry may change (503, 500, 408, 429) are retried with a growing delay
// and dead-lettered after subjects.InputMaxDeliver deliveries; a message
// delivered more often than that without being settled (its gateways kept
// stopping) is dead-lettered without running. Nothing is retried forever.
package queueinput
