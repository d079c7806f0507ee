package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// typeLockSQL takes a transaction-level advisory lock on a type's name and
// version: shared by every create of a resource of the type, exclusive by
// the type's deletion, so a type cannot go while a create is in flight.
const typeLockSQL = `SELECT pg_advisory_xact_lock_shared(hashtextextended($1 || '/' || $2, 7))`

const typeLockExclusiveSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 7))`

const typeColumns = `id, name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy`

func scanType(row pgx.Row) (*resource.Type, error) {
	var t resource.Type
	var schema, policy []byte
	if err := row.Scan(&t.ID, &t.Name, &t.Version, &t.Description, &schema, &t.ResourceVersion, &t.CreatedAt, &t.UpdatedAt, &policy); err != nil {
		return nil, err
	}
	t.Schema = storage.CompactJSON(schema)
	t.ReconcilePolicy = storage.DecodePolicy(policy).WithDefaults()
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

// CreateType registers a resource type.
func (s *Store) CreateType(ctx context.Context, req storage.CreateTypeRequest) (*resource.Type, error) {
	schema, err := storage.ValidateCreateType(req)
	if err != nil {
		return nil, err
	}
	var out *resource.Type
	err = s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanType(tx.QueryRow(ctx, `INSERT INTO resource_types (name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy)
			VALUES ($1, $2, $3, $4, $5, $6, $6, $7) RETURNING `+typeColumns,
			req.Name, req.Version, req.Description, schema, rev, now, storage.EncodePolicy(req.ReconcilePolicy)))
		return err
	})
	if errors.Is(err, storage.ErrNameTaken) {
		return nil, storage.TypeExists(req.Name, req.Version)
	}
	return out, err
}

// GetType returns a resource type.
func (s *Store) GetType(ctx context.Context, key storage.TypeKey) (*resource.Type, error) {
	var row pgx.Row
	if key.ID != 0 {
		row = s.pool.QueryRow(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE id = $1`, key.ID)
	} else {
		row = s.pool.QueryRow(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE name = $1 AND version = $2`, key.Name, key.Version)
	}
	t, err := scanType(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.NotFound("%s not found", key)
	}
	return t, translate(err)
}

// ListTypes lists resource types, optionally of one name, by name and version.
func (s *Store) ListTypes(ctx context.Context, name string) ([]*resource.Type, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE $1 = '' OR name = $1 ORDER BY name, version, id`, name)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []*resource.Type{}
	for rows.Next() {
		t, err := scanType(rows)
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, t)
	}
	return out, translate(rows.Err())
}

// UpdateType changes a resource type.
func (s *Store) UpdateType(ctx context.Context, req storage.UpdateTypeRequest) (*resource.Type, error) {
	schema, err := storage.ValidateUpdateType(req)
	if err != nil {
		return nil, err
	}
	var out *resource.Type
	err = s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
		cur, err := scanType(tx.QueryRow(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE id = $1 FOR UPDATE`, req.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.NotFound("resource type %d not found", req.ID)
		}
		if err != nil {
			return err
		}
		// The policy as the type set it (cur's has the defaults filled in).
		var curPolicy []byte
		if err := tx.QueryRow(ctx, `SELECT reconcile_policy FROM resource_types WHERE id = $1`, req.ID).Scan(&curPolicy); err != nil {
			return err
		}
		u := storage.ApplyTypeUpdate(cur, curPolicy, req, schema)
		if u.Same {
			out = cur
			return nil
		}
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanType(tx.QueryRow(ctx, `UPDATE resource_types SET description = $2, schema = $3, resource_version = $4, updated_at = $5,
			reconcile_policy = $6 WHERE id = $1 RETURNING `+typeColumns, req.ID, u.Description, u.Schema, rev, now, u.Policy))
		return err
	})
	return out, err
}

// DeleteType removes a resource type that no resource uses.
func (s *Store) DeleteType(ctx context.Context, id int64, dryRun bool) error {
	return s.write(ctx, dryRun, func(tx pgx.Tx) error {
		var name, version string
		err := tx.QueryRow(ctx, `SELECT name, version FROM resource_types WHERE id = $1 FOR UPDATE`, id).Scan(&name, &version)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.NotFound("resource type %d not found", id)
		}
		if err != nil {
			return err
		}
		// Wait for creates in flight, and keep new ones out until we commit.
		if _, err := tx.Exec(ctx, typeLockExclusiveSQL, name, version); err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM resources WHERE resource_type_id = $1`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return storage.InUse(name, version, n)
		}
		_, err = tx.Exec(ctx, `DELETE FROM resource_types WHERE id = $1`, id)
		return err
	})
}
