package storage

// API tokens: their record, what a create must hold, when one is active,
// and the stored form of their groups.

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Token is an API token's record. The token's secret is never stored: the
// gateway generates it, shows it once and stores its SHA-256 (SecretHash).
type Token struct {
	// ID is the token's public part (it appears in the token string);
	// unique.
	ID string
	// Name tells its owner's tokens apart: unique among the owner's tokens
	// that are not revoked.
	Name string
	// Owner is the username the token authenticates as.
	Owner string
	// Groups are the groups it authenticates with.
	Groups []string
	// ServiceAccount marks a token for automation rather than a person.
	ServiceAccount bool
	// CreatedBy is the username that created it.
	CreatedBy string
	// CreatedAt is set by the store.
	CreatedAt time.Time
	// ExpiresAt is zero for a token that does not expire.
	ExpiresAt time.Time
	// RevokedAt is zero until the token is revoked.
	RevokedAt time.Time
	// SecretHash is the SHA-256 of the token's secret. The store returns it
	// from LookupToken only.
	SecretHash []byte
}

// CheckToken validates a token to create at now and returns it as stored:
// its times in UTC at the store's precision (microseconds), its groups as
// a JSON array ([] for none). An empty id, name or owner, a hash that is not
// a SHA-256 and an expiry not after now are refused (ErrInvalid, one field
// each); CreatedAt and RevokedAt are the store's and ignored.
func CheckToken(t Token, now time.Time) (Token, []byte, error) {
	var fields []FieldError
	for _, f := range []struct{ path, value string }{{"/id", t.ID}, {"/name", t.Name}, {"/owner", t.Owner}} {
		if f.value == "" {
			fields = append(fields, FieldError{Path: f.path, Message: "required"})
		}
	}
	if len(t.SecretHash) != sha256.Size {
		fields = append(fields, FieldError{Path: "/secret_hash", Message: fmt.Sprintf("must be a SHA-256 (%d bytes), not %d bytes", sha256.Size, len(t.SecretHash))})
	}
	if !t.ExpiresAt.IsZero() && !t.ExpiresAt.After(now) {
		fields = append(fields, FieldError{Path: "/expires_at", Message: "must be in the future"})
	}
	if len(fields) > 0 {
		return Token{}, nil, NewError(ErrInvalid, "invalid API token").WithFields(fields...)
	}
	groups := t.Groups
	if groups == nil {
		groups = []string{}
	}
	stored, err := json.Marshal(groups)
	if err != nil {
		return Token{}, nil, fmt.Errorf("encode token groups: %w", err)
	}
	t.CreatedAt, t.RevokedAt = time.Time{}, time.Time{}
	if !t.ExpiresAt.IsZero() {
		t.ExpiresAt = t.ExpiresAt.UTC().Truncate(time.Microsecond)
	}
	return t, stored, nil
}

// DecodeTokenGroups reads a token's stored groups (nil when it has none).
func DecodeTokenGroups(stored []byte) ([]string, error) {
	if len(stored) == 0 {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal(stored, &out); err != nil {
		return nil, fmt.Errorf("decode token groups: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// TokenNameTaken turns a backend's ErrNameTaken on a token's create (a
// unique violation: the index on the owner's names of tokens not revoked)
// into the error naming the token; other errors, TokenIDTaken's included,
// are returned as they are.
func TokenNameTaken(err error, owner, name string) error {
	var se *Error
	if errors.As(err, &se) && errors.Is(se.Err, ErrNameTaken) && len(se.Fields) == 0 {
		return NewError(ErrNameTaken, "%s already has an API token named %q", owner, name).
			WithFields(FieldError{Path: "/name", Message: "already taken"})
	}
	return err
}

// TokenIDTaken is the error of a create whose id another token has.
func TokenIDTaken(id string) error {
	return NewError(ErrNameTaken, "an API token with id %q exists", id).
		WithFields(FieldError{Path: "/id", Message: "already taken"})
}

// TokenNotFound is ErrNotFound about the token id (of owner, when set).
func TokenNotFound(id, owner string) error {
	if owner != "" {
		return NotFound("%s has no API token %q", owner, id)
	}
	return NotFound("API token %q not found", id)
}
