package queueinput

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// keyRecord is the value of an idempotency key in the bucket.
type keyRecord struct {
	// Digest is the SHA-256 of the operation, the dry-run header and the
	// body of the message that claimed the key: "the same message".
	Digest string `json:"digest"`
	// Sequence is the claiming message's stream sequence: its redelivery
	// takes the claim over.
	Sequence uint64 `json:"sequence"`
	// Done is set once the outcome is recorded.
	Done    bool     `json:"done"`
	Outcome *outcome `json:"outcome,omitempty"`
}

// outcome is a recorded answer.
type outcome struct {
	Status int               `json:"status"`
	Header map[string]string `json:"header,omitempty"`
	// Body is the answer's JSON body; nil when it was too large to keep
	// (a replay then carries status and headers only).
	Body json.RawMessage `json:"body,omitempty"`
}

// maxRecordedBody bounds the body kept with a key, so that a record fits a
// message.
const maxRecordedBody = 512 << 10

func outcomeOf(a Answer) *outcome {
	o := &outcome{Status: a.Status, Header: a.Header}
	if len(a.Body) <= maxRecordedBody && json.Valid(a.Body) {
		o.Body = a.Body
	}
	return o
}

func (o *outcome) answer() Answer {
	return Answer{Status: o.Status, Header: o.Header, Body: o.Body}
}

// digest identifies a message's content.
func digest(op Op, dryRun string, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", op, dryRun)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// claimState is what claim found.
type claimState int

const (
	// claimed: this message holds the key (new, or its own claim from an
	// earlier delivery); run it.
	claimed claimState = iota + 1
	// claimedDone: this message's own earlier delivery recorded the
	// outcome; publish it again and ack.
	claimedDone
	// duplicate: another message with the same content recorded its
	// outcome; replay it.
	duplicate
	// inFlight: another message with the same content holds the key and
	// is still running.
	inFlight
	// reused: the key belongs to a message with other content.
	reused
)

// claimResult is the state of a key after claim.
type claimResult struct {
	state    claimState
	rec      keyRecord
	revision uint64
}

// claim takes key for the message with the given digest and sequence, or
// says who holds it. The bucket's create is the arbiter: of two messages
// claiming one key at once, exactly one creates it.
func claim(ctx context.Context, kv jetstream.KeyValue, key, dig string, seq uint64) (claimResult, error) {
	for {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			rec := keyRecord{Digest: dig, Sequence: seq}
			val, err := json.Marshal(rec)
			if err != nil {
				return claimResult{}, fmt.Errorf("encode key record: %w", err)
			}
			rev, err := kv.Create(ctx, key, val)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // claimed meanwhile: look again
			}
			if err != nil {
				return claimResult{}, fmt.Errorf("claim key %s: %w", key, err)
			}
			return claimResult{state: claimed, rec: rec, revision: rev}, nil
		}
		if err != nil {
			return claimResult{}, fmt.Errorf("read key %s: %w", key, err)
		}
		r, err := claimOf(e)
		if err != nil {
			return claimResult{}, err
		}
		rec := r.rec
		switch {
		case rec.Digest != dig:
			r.state = reused
		case rec.Sequence == seq && rec.Done:
			r.state = claimedDone
		case rec.Sequence == seq:
			r.state = claimed
		case rec.Done:
			r.state = duplicate
		default:
			r.state = inFlight
		}
		return r, nil
	}
}

// claimOf decodes a key's entry (its state is left unset).
func claimOf(e jetstream.KeyValueEntry) (claimResult, error) {
	var rec keyRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return claimResult{}, fmt.Errorf("decode key %s: %w", e.Key(), err)
	}
	return claimResult{rec: rec, revision: e.Revision()}, nil
}

// finish records a's outcome under key, if the claim at revision still
// holds. When another delivery of the same message recorded first (a
// redelivery raced this one), its record stands and is returned.
func finish(ctx context.Context, kv jetstream.KeyValue, key string, c claimResult, a Answer) (keyRecord, error) {
	rec := c.rec
	rec.Done, rec.Outcome = true, outcomeOf(a)
	val, err := json.Marshal(rec)
	if err != nil {
		return keyRecord{}, fmt.Errorf("encode key record: %w", err)
	}
	if _, err := kv.Update(ctx, key, val, c.revision); err == nil {
		return rec, nil
	} else if !casConflict(err) {
		return keyRecord{}, fmt.Errorf("record outcome of key %s: %w", key, err)
	}
	// The claim moved: another delivery of this message recorded its
	// outcome first (or took the claim over and is still running).
	e, err := kv.Get(ctx, key)
	if err != nil {
		return keyRecord{}, fmt.Errorf("read key %s: %w", key, err)
	}
	var cur keyRecord
	if err := json.Unmarshal(e.Value(), &cur); err != nil {
		return keyRecord{}, fmt.Errorf("decode key %s: %w", key, err)
	}
	if cur.Done && cur.Digest == rec.Digest {
		return cur, nil
	}
	if _, err := kv.Update(ctx, key, val, e.Revision()); err != nil {
		return keyRecord{}, fmt.Errorf("record outcome of key %s: %w", key, err)
	}
	return rec, nil
}

// release forgets key (the message holding it was dead-lettered: nothing
// happened, so the client may send it again), unless another message
// holds it by now.
func release(ctx context.Context, kv jetstream.KeyValue, key string, c claimResult) error {
	err := kv.Delete(ctx, key, jetstream.LastRevision(c.revision))
	if err != nil && !casConflict(err) {
		return fmt.Errorf("release key %s: %w", key, err)
	}
	return nil
}

// casConflict reports whether err is a compare-and-set that found another
// revision.
func casConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
