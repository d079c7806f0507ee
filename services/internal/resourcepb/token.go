package resourcepb

import (
	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authn"
)

// TokenFromProto converts a token's record to its API document (never
// with its secret's hash; Value is the caller's to set).
func TokenFromProto(t *storev1.Token) *client.Token {
	groups := t.GetGroups()
	if groups == nil {
		groups = []string{}
	}
	return &client.Token{ID: t.GetId(), Name: t.GetName(), Owner: t.GetOwner(), Groups: groups,
		ServiceAccount: t.GetServiceAccount(), CreatedBy: t.GetCreatedBy(), CreatedAt: asTime(t.GetCreatedAt()),
		ExpiresAt: asTimePtr(t.GetExpiresAt()), RevokedAt: asTimePtr(t.GetRevokedAt())}
}

// TokenRecordFromProto is what the authenticator needs of a token's
// record.
func TokenRecordFromProto(t *storev1.Token) *authn.TokenRecord {
	return &authn.TokenRecord{Owner: t.GetOwner(), Groups: t.GetGroups(), SecretHash: t.GetSecretHash(),
		ExpiresAt: asTime(t.GetExpiresAt()), RevokedAt: asTime(t.GetRevokedAt())}
}

// TokenToProto is the record of a new token.
func TokenToProto(t *client.Token, secretHash []byte) *storev1.Token {
	return &storev1.Token{Id: t.ID, Name: t.Name, Owner: t.Owner, Groups: t.Groups, ServiceAccount: t.ServiceAccount,
		CreatedBy: t.CreatedBy, ExpiresAt: tsPtr(t.ExpiresAt), SecretHash: secretHash}
}
