package store_test

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
)

// startTokens serves a store on a fresh database and returns TokenService
// clients on its main listener and on its workers' listener.
func startTokens(t *testing.T) (main, workers storev1.TokenServiceClient) {
	t.Helper()
	addr, workerAddr, _ := serveStore(t, nil)
	dial := func(addr string) storev1.TokenServiceClient {
		conn, err := grpcserver.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return storev1.NewTokenServiceClient(conn)
	}
	return dial(addr), dial(workerAddr)
}

func secretHash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// wantCode fails unless err has code and, when field is set, names that
// field in its details.
func wantCode(t *testing.T, what string, err error, code codes.Code, field string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
	if field == "" {
		return
	}
	pe := problem.As(grpcstatus.FromStatus(err))
	if pe == nil || len(pe.Fields) != 1 || pe.Fields[0].Path != field {
		t.Fatalf("%s: %#v, want the field %s", what, pe, field)
	}
}

// TestTokenServiceOverGRPC drives TokenService through the proto API on the
// store's main listener: a create answers without the hash and with its
// times, a lookup with the hash, lists never with it and without inactive
// tokens unless asked, revokes are idempotent and held to their owner, and
// the store's errors arrive with their codes (name_taken, not_found, field
// violations). The workers' listener does not serve it.
func TestTokenServiceOverGRPC(t *testing.T) {
	ctx := t.Context()
	tokens, workers := startTokens(t)
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	hash := secretHash("s1")

	created, err := tokens.CreateToken(ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{
		Id: "id1", Name: "laptop", Owner: "alice", Groups: []string{"dev"}, ServiceAccount: true, CreatedBy: "admin",
		ExpiresAt: timestamppb.New(expires), SecretHash: hash,
		RevokedAt: timestamppb.Now(), // the store's: ignored
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := created.GetToken()
	if c.GetId() != "id1" || c.GetName() != "laptop" || c.GetOwner() != "alice" || !slices.Equal(c.GetGroups(), []string{"dev"}) ||
		!c.GetServiceAccount() || c.GetCreatedBy() != "admin" || c.GetCreatedAt() == nil || !c.GetExpiresAt().AsTime().Equal(expires) ||
		c.GetRevokedAt() != nil || c.GetSecretHash() != nil {
		t.Fatalf("created %v", c)
	}
	plain, err := tokens.CreateToken(ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{Id: "id2", Name: "ci", Owner: "bob", SecretHash: secretHash("s2")}})
	if err != nil {
		t.Fatal(err)
	}
	if plain.GetToken().GetExpiresAt() != nil || plain.GetToken().GetRevokedAt() != nil {
		t.Fatalf("a token without expiry: %v", plain.GetToken())
	}

	// Refusals.
	_, err = tokens.CreateToken(ctx, &storev1.CreateTokenRequest{})
	wantCode(t, "create without a token", err, codes.InvalidArgument, "/token")
	_, err = tokens.CreateToken(ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{Id: "id3", Name: "laptop", Owner: "alice", SecretHash: secretHash("s3")}})
	wantCode(t, "create a taken name", err, codes.AlreadyExists, "/name")
	if pe := problem.As(grpcstatus.FromStatus(err)); pe == nil || pe.Code != problem.CodeNameTaken {
		t.Errorf("name taken: %#v, want code %s", pe, problem.CodeNameTaken)
	}
	_, err = tokens.CreateToken(ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{Id: "id3", Name: "x", Owner: "alice", SecretHash: []byte("short")}})
	wantCode(t, "create with a short hash", err, codes.InvalidArgument, "/secret_hash")
	_, err = tokens.CreateToken(ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{Id: "id3", Name: "x", Owner: "alice", SecretHash: secretHash("s3"),
		ExpiresAt: timestamppb.New(time.Now().Add(-time.Minute))}})
	wantCode(t, "create with a past expiry", err, codes.InvalidArgument, "/expires_at")
	_, err = tokens.LookupToken(ctx, &storev1.LookupTokenRequest{Id: "nope"})
	wantCode(t, "look up an unknown id", err, codes.NotFound, "")
	_, err = tokens.LookupToken(ctx, &storev1.LookupTokenRequest{})
	wantCode(t, "look up without an id", err, codes.InvalidArgument, "/id")

	// A lookup carries the hash; a list never does.
	got, err := tokens.LookupToken(ctx, &storev1.LookupTokenRequest{Id: "id1"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.GetToken().GetSecretHash(), hash) || !got.GetToken().GetCreatedAt().AsTime().Equal(c.GetCreatedAt().AsTime()) {
		t.Fatalf("looked up %v", got.GetToken())
	}
	list := func(owner string, inactive bool) []string {
		t.Helper()
		res, err := tokens.ListTokens(ctx, &storev1.ListTokensRequest{Owner: owner, IncludeInactive: inactive})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tok := range res.GetTokens() {
			if tok.GetSecretHash() != nil {
				t.Errorf("token %s listed with its hash", tok.GetId())
			}
			ids = append(ids, tok.GetId())
		}
		return ids
	}
	if ids := list("", false); !slices.Equal(ids, []string{"id1", "id2"}) {
		t.Fatalf("every token: %v", ids)
	}
	if ids := list("alice", false); !slices.Equal(ids, []string{"id1"}) {
		t.Fatalf("alice's: %v", ids)
	}

	// Revokes: held to the owner, idempotent.
	_, err = tokens.RevokeToken(ctx, &storev1.RevokeTokenRequest{Id: "id1", Owner: "bob"})
	wantCode(t, "revoke another owner's token", err, codes.NotFound, "")
	revoked, err := tokens.RevokeToken(ctx, &storev1.RevokeTokenRequest{Id: "id1", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	at := revoked.GetToken().GetRevokedAt()
	if at == nil || revoked.GetToken().GetSecretHash() != nil {
		t.Fatalf("revoked %v", revoked.GetToken())
	}
	again, err := tokens.RevokeToken(ctx, &storev1.RevokeTokenRequest{Id: "id1"})
	if err != nil || !again.GetToken().GetRevokedAt().AsTime().Equal(at.AsTime()) {
		t.Fatalf("revoke again: %v %v, want revoked at %v", again.GetToken(), err, at.AsTime())
	}
	if ids := list("alice", false); len(ids) != 0 {
		t.Errorf("alice's active tokens after the revoke: %v", ids)
	}
	if ids := list("alice", true); !slices.Equal(ids, []string{"id1"}) {
		t.Errorf("alice's tokens, inactive included: %v", ids)
	}
	if got, err := tokens.LookupToken(ctx, &storev1.LookupTokenRequest{Id: "id1"}); err != nil || got.GetToken().GetRevokedAt() == nil {
		t.Errorf("a revoked token looks up as %v %v", got.GetToken(), err)
	}
	// Its name is free again.
	if _, err := tokens.CreateToken(ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{Id: "id3", Name: "laptop", Owner: "alice", SecretHash: secretHash("s3")}}); err != nil {
		t.Fatalf("reuse a revoked token's name: %v", err)
	}

	_, err = workers.LookupToken(ctx, &storev1.LookupTokenRequest{Id: "id1"})
	wantCode(t, "TokenService on the workers' listener", err, codes.Unimplemented, "")
}
