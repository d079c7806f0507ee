package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/store/storage"
)

// tokenColumns are a token's columns but its hash, which only LookupToken
// reads (tokenColumns, then secret_hash).
const tokenColumns = `id, name, owner, groups, service_account, created_by, created_at, expires_at, revoked_at`

// scanToken reads tokenColumns, and secret_hash after them when withHash.
func scanToken(row pgx.Row, withHash bool) (*storage.Token, error) {
	var t storage.Token
	var groups []byte
	var expires, revoked *time.Time
	dest := []any{&t.ID, &t.Name, &t.Owner, &groups, &t.ServiceAccount, &t.CreatedBy, &t.CreatedAt, &expires, &revoked}
	if withHash {
		dest = append(dest, &t.SecretHash)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	var err error
	if t.Groups, err = storage.DecodeTokenGroups(groups); err != nil {
		return nil, fmt.Errorf("token %s: %w", t.ID, err)
	}
	t.CreatedAt = t.CreatedAt.UTC()
	if expires != nil {
		t.ExpiresAt = expires.UTC()
	}
	if revoked != nil {
		t.RevokedAt = revoked.UTC()
	}
	return &t, nil
}

// nullTime is t as stored: NULL when zero.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// tokenErr returns the store's errors as they are and wraps any other
// (unexpected) error with what failed.
func tokenErr(op string, err error) error {
	if storage.Translated(err) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// CreateToken stores a new API token (storage.CheckToken's rules). An id
// another token has is refused (ErrNameTaken on /id), as is a name its
// owner's tokens that are not revoked have (the partial unique index).
func (s *Store) CreateToken(ctx context.Context, in storage.Token) (*storage.Token, error) {
	t, groups, err := storage.CheckToken(in, time.Now())
	if err != nil {
		return nil, err
	}
	var out *storage.Token
	err = s.write(ctx, false, func(tx pgx.Tx) error {
		var err error
		out, err = scanToken(tx.QueryRow(ctx, `INSERT INTO api_tokens (id, name, owner, groups, service_account, created_by, created_at,
			expires_at, secret_hash)
			VALUES ($1, $2, $3, $4, $5, $6, now(), $7, $8) ON CONFLICT (id) DO NOTHING RETURNING `+tokenColumns,
			t.ID, t.Name, t.Owner, groups, t.ServiceAccount, t.CreatedBy, nullTime(t.ExpiresAt), t.SecretHash), false)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.TokenIDTaken(t.ID)
		}
		return err
	})
	if err != nil {
		return nil, tokenErr("create API token", storage.TokenNameTaken(err, t.Owner, t.Name))
	}
	return out, nil
}

// ListTokens lists API tokens, of owner when set, oldest first, without
// their hash; revoked and expired ones only with includeInactive.
func (s *Store) ListTokens(ctx context.Context, owner string, includeInactive bool) ([]*storage.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM api_tokens
		WHERE ($1 = '' OR owner = $1) AND ($2 OR (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())))
		ORDER BY created_at, id`, owner, includeInactive)
	if err != nil {
		return nil, tokenErr("list API tokens", translate(err))
	}
	defer rows.Close()
	out := []*storage.Token{}
	for rows.Next() {
		t, err := scanToken(rows, false)
		if err != nil {
			return nil, tokenErr("list API tokens", translate(err))
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, tokenErr("list API tokens", translate(err))
	}
	return out, nil
}

// RevokeToken sets a token's revoked_at unless it is set already, in one
// statement, and returns it without its hash.
func (s *Store) RevokeToken(ctx context.Context, id, owner string) (*storage.Token, error) {
	var out *storage.Token
	err := s.write(ctx, false, func(tx pgx.Tx) error {
		var err error
		out, err = scanToken(tx.QueryRow(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now())
			WHERE id = $1 AND ($2 = '' OR owner = $2) RETURNING `+tokenColumns, id, owner), false)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.TokenNotFound(id, owner)
		}
		return err
	})
	if err != nil {
		return nil, tokenErr("revoke API token", err)
	}
	return out, nil
}

// LookupToken returns a token with its hash, revoked and expired ones
// included.
func (s *Store) LookupToken(ctx context.Context, id string) (*storage.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+`, secret_hash FROM api_tokens WHERE id = $1`, id), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.TokenNotFound(id, "")
	}
	if err != nil {
		return nil, tokenErr("look up API token", translate(err))
	}
	return t, nil
}
