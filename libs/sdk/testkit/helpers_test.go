package testkit_test

import (
	"context"
	"testing"

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
