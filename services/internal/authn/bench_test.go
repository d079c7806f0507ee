package authn

import (
	"context"
	"testing"
)

// BenchmarkAuthenticateAPIToken is a cached API token's cost per request.
func BenchmarkAuthenticateAPIToken(b *testing.B) {
	id, hash, tok, err := NewToken()
	if err != nil {
		b.Fatal(err)
	}
	rec := &TokenRecord{Owner: "u", SecretHash: hash}
	a := New(Config{Tokens: func(_ context.Context, got string) (*TokenRecord, error) {
		if got != id {
			return nil, ErrUnknownToken
		}
		return rec, nil
	}})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}
