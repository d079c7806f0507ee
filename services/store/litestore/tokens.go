package litestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/no8s/no8s/services/store/storage"
)

// tokenColumns are a token's columns but its hash, which only LookupToken
// reads (tokenColumns, then secret_hash).
const tokenColumns = `id, name, owner, groups, service_account, created_by, created_at, expires_at, revoked_at`

// scanToken reads tokenColumns, and secret_hash after them when withHash.
func scanToken(row scanner, withHash bool) (*storage.Token, error) {
	var t storage.Token
	var groups string
	var created int64
	var expires, revoked sql.NullInt64
	dest := []any{&t.ID, &t.Name, &t.Owner, &groups, &t.ServiceAccount, &t.CreatedBy, &created, &expires, &revoked}
	if withHash {
		dest = append(dest, &t.SecretHash)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	var err error
	if t.Groups, err = storage.DecodeTokenGroups([]byte(groups)); err != nil {
		return nil, fmt.Errorf("token %s: %w", t.ID, err)
	}
	t.CreatedAt = timeOf(created)
	if expires.Valid {
		t.ExpiresAt = timeOf(expires.Int64)
	}
	if revoked.Valid {
		t.RevokedAt = timeOf(revoked.Int64)
	}
	return &t, nil
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
	t, groups, err := storage.CheckToken(in, clock())
	if err != nil {
		return nil, err
	}
	var expires any
	if !t.ExpiresAt.IsZero() {
		expires = micros(t.ExpiresAt)
	}
	var out *storage.Token
	err = s.write(ctx, false, func(tx *wtx) error {
		var err error
		out, err = scanToken(tx.QueryRowContext(ctx, `INSERT INTO api_tokens (id, name, owner, groups, service_account, created_by, created_at,
			expires_at, secret_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING `+tokenColumns,
			t.ID, t.Name, t.Owner, string(groups), t.ServiceAccount, t.CreatedBy, micros(tx.now), expires, t.SecretHash), false)
		if errors.Is(err, sql.ErrNoRows) {
			return storage.TokenIDTaken(t.ID)
		}
		return err
	})
	if err != nil {
		return nil, tokenErr("create API token", storage.TokenNameTaken(err, t.Owner, t.Name))
	}
	return out, nil
}

// ListTokens lists API tokens, of owner when set, oldest first (rowid
// breaks ties of created_at: the order of the inserts), without their
// hash; revoked and expired ones only with includeInactive.
func (s *Store) ListTokens(ctx context.Context, owner string, includeInactive bool) ([]*storage.Token, error) {
	out := []*storage.Token{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens
			WHERE (?1 = '' OR owner = ?1) AND (?2 OR (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?3)))
			ORDER BY created_at, rowid`, owner, includeInactive, micros(clock()))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanToken(rows, false)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, tokenErr("list API tokens", err)
	}
	return out, nil
}

// RevokeToken sets a token's revoked_at unless it is set already, in one
// statement, and returns it without its hash.
func (s *Store) RevokeToken(ctx context.Context, id, owner string) (*storage.Token, error) {
	var out *storage.Token
	err := s.write(ctx, false, func(tx *wtx) error {
		var err error
		out, err = scanToken(tx.QueryRowContext(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?3)
			WHERE id = ?1 AND (?2 = '' OR owner = ?2) RETURNING `+tokenColumns, id, owner, micros(tx.now)), false)
		if errors.Is(err, sql.ErrNoRows) {
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
	t, err := scanToken(s.r.QueryRowContext(ctx, `SELECT `+tokenColumns+`, secret_hash FROM api_tokens WHERE id = ?`, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storage.TokenNotFound(id, "")
	}
	if err != nil {
		return nil, tokenErr("look up API token", translate(err))
	}
	return t, nil
}
