package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"slices"
	"testing"
	"time"

	"github.com/no8s/no8s/services/store/storage"
)

// apiToken is a valid token to create: id, owner and name as given, the
// hash of a secret named after its id.
func apiToken(id, owner, name string) storage.Token {
	sum := sha256.Sum256([]byte("secret of " + id))
	return storage.Token{ID: id, Owner: owner, Name: name, SecretHash: sum[:], CreatedBy: "admin"}
}

func mustToken(t *testing.T, s storage.Store, in storage.Token) *storage.Token {
	t.Helper()
	out, err := s.CreateToken(t.Context(), in)
	if err != nil {
		t.Fatalf("create token %s: %v", in.ID, err)
	}
	return out
}

// tokenIDs lists the ids of owner's tokens ("" every owner's), failing t
// on an error or a token listed with its hash.
func tokenIDs(t *testing.T, s storage.Store, owner string, includeInactive bool) []string {
	t.Helper()
	list, err := s.ListTokens(t.Context(), owner, includeInactive)
	if err != nil {
		t.Fatalf("list tokens of %q: %v", owner, err)
	}
	ids := []string{}
	for _, tok := range list {
		if tok.SecretHash != nil {
			t.Errorf("token %s listed with its hash", tok.ID)
		}
		ids = append(ids, tok.ID)
	}
	return ids
}

// testTokenCreateAndLookup: a token reads back as it was created, CreatedAt
// the store's, expiry at the store's precision; the hash only from a
// lookup.
func testTokenCreateAndLookup(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	in := apiToken("tok1", "alice", "laptop")
	in.Groups, in.ServiceAccount = []string{"dev", "ops"}, true
	in.ExpiresAt = time.Now().Add(time.Hour)
	in.CreatedAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // the store's
	in.RevokedAt = in.CreatedAt                                // the store's
	before := time.Now().Add(-time.Second)
	created := mustToken(t, s, in)
	wantExpiry := in.ExpiresAt.UTC().Truncate(time.Microsecond)
	if created.ID != "tok1" || created.Owner != "alice" || created.Name != "laptop" || !slices.Equal(created.Groups, in.Groups) ||
		!created.ServiceAccount || created.CreatedBy != "admin" || !created.ExpiresAt.Equal(wantExpiry) || !created.RevokedAt.IsZero() {
		t.Fatalf("created %+v", created)
	}
	if created.CreatedAt.Before(before) || created.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("created at %v, not now", created.CreatedAt)
	}
	if created.SecretHash != nil {
		t.Error("CreateToken returned the hash")
	}
	got, err := s.LookupToken(ctx, "tok1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.SecretHash, in.SecretHash) {
		t.Errorf("looked up hash %x, want %x", got.SecretHash, in.SecretHash)
	}
	got.SecretHash = nil
	if !tokensEqual(got, created) {
		t.Errorf("looked up %+v, created %+v", got, created)
	}

	// No groups, no expiry: read back as none.
	plain := mustToken(t, s, apiToken("tok2", "bob", "ci"))
	if plain.Groups != nil || !plain.ExpiresAt.IsZero() || plain.ServiceAccount {
		t.Errorf("created %+v", plain)
	}
	if got, err := s.LookupToken(ctx, "tok2"); err != nil || got.Groups != nil || !got.ExpiresAt.IsZero() {
		t.Errorf("looked up %+v %v", got, err)
	}
	_, err = s.LookupToken(ctx, "nope")
	wantErr(t, err, storage.ErrNotFound)
}

func tokensEqual(a, b *storage.Token) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Owner == b.Owner && slices.Equal(a.Groups, b.Groups) &&
		a.ServiceAccount == b.ServiceAccount && a.CreatedBy == b.CreatedBy && a.CreatedAt.Equal(b.CreatedAt) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.RevokedAt.Equal(b.RevokedAt) && bytes.Equal(a.SecretHash, b.SecretHash)
}

// testTokenNames: a name is unique among its owner's tokens that are not
// revoked: taken while one is active, free for another owner, free again
// once revoked; an id is unique.
func testTokenNames(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	first := mustToken(t, s, apiToken("a1", "alice", "laptop"))
	_, err := s.CreateToken(ctx, apiToken("a2", "alice", "laptop"))
	wantErr(t, err, storage.ErrNameTaken)
	if se := storeErr(err); len(se.Fields) != 1 || se.Fields[0].Path != "/name" {
		t.Errorf("name taken: fields %+v, want /name", se.Fields)
	}
	mustToken(t, s, apiToken("b1", "bob", "laptop"))
	_, err = s.CreateToken(ctx, apiToken("a1", "carol", "other"))
	wantErr(t, err, storage.ErrNameTaken)
	if se := storeErr(err); len(se.Fields) != 1 || se.Fields[0].Path != "/id" {
		t.Errorf("id taken: fields %+v, want /id", se.Fields)
	}
	if ids := tokenIDs(t, s, "", true); !slices.Equal(ids, []string{"a1", "b1"}) {
		t.Fatalf("after refused creates: %v", ids)
	}

	if _, err := s.RevokeToken(ctx, first.ID, ""); err != nil {
		t.Fatal(err)
	}
	again := mustToken(t, s, apiToken("a2", "alice", "laptop"))
	if again.Name != "laptop" || !again.RevokedAt.IsZero() {
		t.Fatalf("reused name: %+v", again)
	}
	_, err = s.CreateToken(ctx, apiToken("a3", "alice", "laptop"))
	wantErr(t, err, storage.ErrNameTaken)
}

// testTokenListFilters: lists are oldest first, of one owner when asked,
// without revoked and expired tokens unless asked.
func testTokenListFilters(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	if ids := tokenIDs(t, s, "", true); len(ids) != 0 {
		t.Fatalf("empty store lists %v", ids)
	}
	mustToken(t, s, apiToken("a1", "alice", "one"))
	mustToken(t, s, apiToken("b1", "bob", "one"))
	mustToken(t, s, apiToken("a2", "alice", "two"))
	revoked := mustToken(t, s, apiToken("a3", "alice", "three"))
	if _, err := s.RevokeToken(ctx, revoked.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	short := apiToken("a4", "alice", "short")
	short.ExpiresAt = time.Now().Add(time.Second)
	mustToken(t, s, short)

	if ids := tokenIDs(t, s, "", true); !slices.Equal(ids, []string{"a1", "b1", "a2", "a3", "a4"}) {
		t.Errorf("every token: %v", ids)
	}
	if ids := tokenIDs(t, s, "alice", true); !slices.Equal(ids, []string{"a1", "a2", "a3", "a4"}) {
		t.Errorf("alice's, inactive included: %v", ids)
	}
	if ids := tokenIDs(t, s, "bob", false); !slices.Equal(ids, []string{"b1"}) {
		t.Errorf("bob's: %v", ids)
	}
	if ids := tokenIDs(t, s, "nobody", true); len(ids) != 0 {
		t.Errorf("an unknown owner's: %v", ids)
	}
	// The revoked token is left out at once, the short-lived one once it
	// has expired.
	eventually(t, 5*time.Second, "an expired token leaves the list", func(context.Context) bool {
		ids := tokenIDs(t, s, "alice", false)
		if slices.Contains(ids, "a3") {
			t.Fatalf("a revoked token is listed as active: %v", ids)
		}
		return slices.Equal(ids, []string{"a1", "a2"})
	})
	if ids := tokenIDs(t, s, "", false); !slices.Equal(ids, []string{"a1", "b1", "a2"}) {
		t.Errorf("every active token: %v", ids)
	}
	if ids := tokenIDs(t, s, "alice", true); !slices.Equal(ids, []string{"a1", "a2", "a3", "a4"}) {
		t.Errorf("alice's after the expiry, inactive included: %v", ids)
	}
	// An expired token is still looked up, with its hash: the caller
	// checks the expiry.
	if got, err := s.LookupToken(ctx, "a4"); err != nil || got.SecretHash == nil || got.ExpiresAt.After(time.Now()) {
		t.Errorf("look up the expired token: %+v %v", got, err)
	}
}

// testTokenRevoke: a revoke sets RevokedAt once; again, it changes nothing;
// another owner's token or an unknown id is not found, and nothing
// changes.
func testTokenRevoke(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	tok := mustToken(t, s, apiToken("a1", "alice", "laptop"))

	_, err := s.RevokeToken(ctx, tok.ID, "bob")
	wantErr(t, err, storage.ErrNotFound)
	if got, err := s.LookupToken(ctx, tok.ID); err != nil || !got.RevokedAt.IsZero() {
		t.Fatalf("after another owner's revoke: %+v %v", got, err)
	}
	_, err = s.RevokeToken(ctx, "nope", "")
	wantErr(t, err, storage.ErrNotFound)
	_, err = s.RevokeToken(ctx, "nope", "alice")
	wantErr(t, err, storage.ErrNotFound)

	revoked, err := s.RevokeToken(ctx, tok.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if revoked.RevokedAt.IsZero() || revoked.RevokedAt.Before(tok.CreatedAt) || revoked.SecretHash != nil {
		t.Fatalf("revoked %+v", revoked)
	}
	want := *tok
	want.RevokedAt = revoked.RevokedAt
	if !tokensEqual(revoked, &want) {
		t.Errorf("revoked %+v, want %+v", revoked, want)
	}
	// Again, as the owner or without one: unchanged.
	waitPast(t, time.Now())
	for _, owner := range []string{"alice", ""} {
		again, err := s.RevokeToken(ctx, tok.ID, owner)
		if err != nil || !tokensEqual(again, revoked) {
			t.Errorf("revoke again (owner %q): %+v %v, want %+v", owner, again, err, revoked)
		}
	}
	_, err = s.RevokeToken(ctx, tok.ID, "bob")
	wantErr(t, err, storage.ErrNotFound)
	got, err := s.LookupToken(ctx, tok.ID)
	if err != nil || !got.RevokedAt.Equal(revoked.RevokedAt) {
		t.Fatalf("looked up after the revokes: %+v %v", got, err)
	}
}

// testTokenBadInputWritesNothing: each invalid create is refused with
// ErrInvalid naming its field, and writes nothing.
func testTokenBadInputWritesNothing(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	valid := apiToken("t1", "alice", "laptop")
	for _, c := range []struct {
		what, field string
		edit        func(*storage.Token)
	}{
		{"no id", "/id", func(tok *storage.Token) { tok.ID = "" }},
		{"no name", "/name", func(tok *storage.Token) { tok.Name = "" }},
		{"no owner", "/owner", func(tok *storage.Token) { tok.Owner = "" }},
		{"no hash", "/secret_hash", func(tok *storage.Token) { tok.SecretHash = nil }},
		{"a short hash", "/secret_hash", func(tok *storage.Token) { tok.SecretHash = tok.SecretHash[:31] }},
		{"a long hash", "/secret_hash", func(tok *storage.Token) { tok.SecretHash = append(slices.Clone(tok.SecretHash), 0) }},
		{"an expiry in the past", "/expires_at", func(tok *storage.Token) { tok.ExpiresAt = time.Now().Add(-time.Minute) }},
	} {
		in := valid
		c.edit(&in)
		_, err := s.CreateToken(ctx, in)
		wantErr(t, err, storage.ErrInvalid)
		if se := storeErr(err); len(se.Fields) != 1 || se.Fields[0].Path != c.field {
			t.Errorf("%s: fields %+v, want %s", c.what, se.Fields, c.field)
		}
	}
	if ids := tokenIDs(t, s, "", true); len(ids) != 0 {
		t.Fatalf("refused creates wrote %v", ids)
	}
	_, err := s.LookupToken(ctx, valid.ID)
	wantErr(t, err, storage.ErrNotFound)
	mustToken(t, s, valid)
}
