package store

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/store/storage"
)

// tokenHandler is the gRPC edge of the store's API tokens (TokenService),
// served beside StoreService on the main listener: the gateway keeps its
// tokens there.
type tokenHandler struct {
	storev1.UnimplementedTokenServiceServer
	store storage.Store
}

func (h *tokenHandler) CreateToken(ctx context.Context, req *storev1.CreateTokenRequest) (*storev1.CreateTokenResponse, error) {
	in, err := tokenFromProto(req.GetToken())
	if err != nil {
		return nil, toStatus(err)
	}
	out, err := h.store.CreateToken(ctx, *in)
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.CreateTokenResponse{Token: tokenToProto(out)}, nil
}

func (h *tokenHandler) ListTokens(ctx context.Context, req *storev1.ListTokensRequest) (*storev1.ListTokensResponse, error) {
	list, err := h.store.ListTokens(ctx, req.GetOwner(), req.GetIncludeInactive())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &storev1.ListTokensResponse{Tokens: make([]*storev1.Token, 0, len(list))}
	for _, t := range list {
		pt := tokenToProto(t)
		pt.SecretHash = nil // never in a list, whatever the backend read
		out.Tokens = append(out.Tokens, pt)
	}
	return out, nil
}

func (h *tokenHandler) RevokeToken(ctx context.Context, req *storev1.RevokeTokenRequest) (*storev1.RevokeTokenResponse, error) {
	if req.GetId() == "" {
		return nil, toStatus(problem.Field("/id", "required"))
	}
	out, err := h.store.RevokeToken(ctx, req.GetId(), req.GetOwner())
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.RevokeTokenResponse{Token: tokenToProto(out)}, nil
}

func (h *tokenHandler) LookupToken(ctx context.Context, req *storev1.LookupTokenRequest) (*storev1.LookupTokenResponse, error) {
	if req.GetId() == "" {
		return nil, toStatus(problem.Field("/id", "required"))
	}
	out, err := h.store.LookupToken(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.LookupTokenResponse{Token: tokenToProto(out)}, nil
}

// tokenFromProto reads a token to create: nil and an invalid expiry are
// refused (InvalidArgument); created_at and revoked_at are the store's and
// ignored. The store checks the rest (storage.CheckToken).
func tokenFromProto(p *storev1.Token) (*storage.Token, error) {
	if p == nil {
		return nil, problem.Field("/token", "required")
	}
	t := &storage.Token{
		ID: p.GetId(), Name: p.GetName(), Owner: p.GetOwner(), Groups: p.GetGroups(),
		ServiceAccount: p.GetServiceAccount(), CreatedBy: p.GetCreatedBy(), SecretHash: p.GetSecretHash(),
	}
	if ts := p.GetExpiresAt(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return nil, problem.Field("/expires_at", "not a valid timestamp")
		}
		t.ExpiresAt = ts.AsTime()
	}
	return t, nil
}

// tokenToProto is a token on the wire: zero times unset, the hash only when
// the store returned it (LookupToken).
func tokenToProto(t *storage.Token) *storev1.Token {
	return &storev1.Token{
		Id: t.ID, Name: t.Name, Owner: t.Owner, Groups: t.Groups, ServiceAccount: t.ServiceAccount, CreatedBy: t.CreatedBy,
		CreatedAt: timestampOrNil(t.CreatedAt), ExpiresAt: timestampOrNil(t.ExpiresAt), RevokedAt: timestampOrNil(t.RevokedAt),
		SecretHash: t.SecretHash,
	}
}

// timestampOrNil is t on the wire: unset when zero.
func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
