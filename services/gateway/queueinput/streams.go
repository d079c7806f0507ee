package queueinput

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
)

// maxMessageBytes bounds the messages of the input's streams: a request
// body, an outcome (a resource document) or a dead letter.
const maxMessageBytes = 1 << 20

// maxAckPending bounds the messages out with the gateways, all together.
const maxAckPending = 1024

// Ensure creates or updates the queue input's streams, its key bucket and
// the shared durable consumer, and returns the consumer and the bucket.
// Every gateway calls it at start and after the broker lost them.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Consumer, jetstream.KeyValue, error) {
	cfg = cfg.withDefaults()
	streams := []jetstream.StreamConfig{
		{
			Name:        subjects.InputStream,
			Description: "no8s queue input: documents to apply or delete, each handled once by one gateway",
			Subjects:    []string{subjects.InputQueueAll},
			Retention:   jetstream.WorkQueuePolicy,
			MaxAge:      subjects.InputMaxAge,
			MaxMsgSize:  maxMessageBytes,
		},
		{
			Name:        subjects.InputOutcomesStream,
			Description: "no8s queue input: the outcome of every message, by idempotency key",
			Subjects:    []string{subjects.InputOutcomesAll},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      subjects.InputOutcomesMaxAge,
			MaxMsgSize:  maxMessageBytes + 64<<10,
		},
		{
			Name:        subjects.InputDeadStream,
			Description: "no8s queue input: messages given up, with the reason",
			Subjects:    []string{subjects.InputDead},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      subjects.InputDeadMaxAge,
			MaxMsgSize:  maxMessageBytes + 64<<10,
		},
	}
	for _, sc := range streams {
		sc.Storage, sc.Replicas = jetstream.FileStorage, cfg.Replicas
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return nil, nil, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      subjects.InputKeysBucket,
		Description: "no8s queue input: idempotency keys and their outcomes",
		History:     1,
		TTL:         cfg.KeyTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ensure bucket %s: %w", subjects.InputKeysBucket, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, subjects.InputStream, jetstream.ConsumerConfig{
		Durable:       subjects.InputConsumer,
		Description:   "the api-gateways, sharing the queue input",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1, // the listener dead-letters past cfg.MaxDeliver itself
		MaxAckPending: maxAckPending,
		FilterSubject: subjects.InputQueueAll,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ensure consumer %s: %w", subjects.InputConsumer, err)
	}
	return cons, kv, nil
}
