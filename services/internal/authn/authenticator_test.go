package authn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingVerifier accepts every JWT until its expiry, counting calls.
type countingVerifier struct {
	calls  int
	expiry time.Time
	now    func() time.Time
}

func (v *countingVerifier) Verify(context.Context, string) (*Principal, error) {
	v.calls++
	if !v.now().Before(v.expiry) {
		return nil, errors.New("token expired")
	}
	return &Principal{Username: "alice", Groups: []string{"platform"}, Method: MethodOIDC, Expiry: v.expiry}, nil
}

// TestVerifiedJWTsAreRemembered: a JWT verified once is taken again without
// verifying it for JWTCacheTTL, never past its expiry; the admin groups are
// mapped either way; a caller changing the answer changes nothing cached.
func TestVerifiedJWTsAreRemembered(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	v := &countingVerifier{expiry: now.Add(15 * time.Second), now: clock}
	a := New(Config{JWT: v, AdminGroups: []string{"platform"}, JWTCacheTTL: 10 * time.Second, Now: clock})
	const jwt = "aaa.bbb.ccc"
	for i := range 3 {
		p, err := a.Authenticate(context.Background(), jwt)
		if err != nil || p.Username != "alice" || len(p.Groups) != 2 || p.Groups[1] != GroupAdmins {
			t.Fatalf("call %d: %+v, %v", i, p, err)
		}
		p.Groups[0] = "changed by the caller"
	}
	if v.calls != 1 {
		t.Fatalf("verified %d times within the TTL, want 1", v.calls)
	}
	now = now.Add(11 * time.Second) // past the TTL: verified again
	if _, err := a.Authenticate(context.Background(), jwt); err != nil || v.calls != 2 {
		t.Fatalf("after the TTL: %v, %d verifications", err, v.calls)
	}
	now = now.Add(5 * time.Second) // past the expiry, within the TTL of the last verification
	var inv *InvalidError
	if _, err := a.Authenticate(context.Background(), jwt); !errors.As(err, &inv) || v.calls != 3 {
		t.Fatalf("after the expiry: %v, %d verifications; want refused after verifying again", err, v.calls)
	}
}

// TestConcurrentRequestsShareOneLookup: requests of one token arriving
// together while it is not cached make one lookup, not one each.
func TestConcurrentRequestsShareOneLookup(t *testing.T) {
	id, hash, tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	release := make(chan struct{})
	a := New(Config{Tokens: func(_ context.Context, got string) (*TokenRecord, error) {
		calls.Add(1)
		<-release
		if got != id {
			return nil, ErrUnknownToken
		}
		return &TokenRecord{Owner: "u", SecretHash: hash}, nil
	}})
	const n = 32
	var joined atomic.Int32
	a.joining = func() { joined.Add(1) }
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := a.Authenticate(t.Context(), tok)
			errs <- err
		})
	}
	// Every request joins the one lookup before it answers (one that
	// joins just as it ends finds the cached record).
	for deadline := time.Now().Add(5 * time.Second); joined.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := joined.Load(); got < n {
		t.Fatalf("%d of %d requests joined a lookup within 5 s", got, n)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := calls.Load(); got < 1 || got > 2 {
		t.Fatalf("%d lookups for %d concurrent requests, want 1 (2 if one arrived after the first ended)", got, n)
	}
}
