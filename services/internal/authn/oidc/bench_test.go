package oidc_test

import "testing"

// BenchmarkVerifyRS256 is one RS256 ID token's verification (keys cached).
func BenchmarkVerifyRS256(b *testing.B) {
	iss, v, _ := setupB(b)
	raw := iss.Sign(iss.Claims("alice", "no8s"))
	ctx := b.Context()
	if _, err := v.Verify(ctx, raw); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, raw); err != nil {
			b.Fatal(err)
		}
	}
}
