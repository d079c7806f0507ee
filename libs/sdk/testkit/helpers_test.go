package testkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/sdk/registry"
	"github.com/no8s/no8s/libs/sdk/testkit"
)

func registryBucket(t *testing.T, env *testkit.Env) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(env.NATS)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), registry.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// registryBucketEventually waits for a worker to create the bucket.
func registryBucketEventually(t *testing.T, env *testkit.Env) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(env.NATS)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		kv, err := js.KeyValue(context.Background(), registry.Bucket)
		if err == nil {
			return kv
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
