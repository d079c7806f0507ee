package litestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

const typeColumns = `id, name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy`

// scanType reads a row of typeColumns; policy receives the stored policy
// when not nil.
func scanType(row scanner, policy *[]byte) (*resource.Type, error) {
	var t resource.Type
	var schema string
	var stored sql.NullString
	var created, updated int64
	if err := row.Scan(&t.ID, &t.Name, &t.Version, &t.Description, &schema, &t.ResourceVersion, &created, &updated, &stored); err != nil {
		return nil, err
	}
	t.Schema = json.RawMessage(schema)
	t.ReconcilePolicy = storage.DecodePolicy([]byte(stored.String)).WithDefaults()
	t.CreatedAt, t.UpdatedAt = timeOf(created), timeOf(updated)
	if policy != nil && stored.Valid {
		*policy = []byte(stored.String)
	}
	return &t, nil
}

// policyText is a stored policy as a TEXT value (NULL when nil).
func policyText(p []byte) any {
	if p == nil {
		return nil
	}
	return string(p)
}

// CreateType registers a resource type.
func (s *Store) CreateType(ctx context.Context, req storage.CreateTypeRequest) (*resource.Type, error) {
	schema, err := storage.ValidateCreateType(req)
	if err != nil {
		return nil, err
	}
	var out *resource.Type
	err = s.write(ctx, req.DryRun, func(tx *wtx) error {
		rev, err := tx.takeVersion(ctx)
		if err != nil {
			return err
		}
		out, err = scanType(tx.QueryRowContext(ctx, `INSERT INTO resource_types (name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+typeColumns,
			req.Name, req.Version, req.Description, string(schema), rev, micros(tx.now), micros(tx.now), policyText(storage.EncodePolicy(req.ReconcilePolicy))), nil)
		return err
	})
	if errors.Is(err, storage.ErrNameTaken) {
		return nil, storage.TypeExists(req.Name, req.Version)
	}
	return out, err
}

// GetType returns a resource type.
func (s *Store) GetType(ctx context.Context, key storage.TypeKey) (*resource.Type, error) {
	var row *sql.Row
	if key.ID != 0 {
		row = s.r.QueryRowContext(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE id = ?`, key.ID)
	} else {
		row = s.r.QueryRowContext(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE name = ? AND version = ?`, key.Name, key.Version)
	}
	t, err := scanType(row, nil)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("%s not found", key)
	}
	return t, translate(err)
}

// ListTypes lists resource types, optionally of one name, by name and version.
func (s *Store) ListTypes(ctx context.Context, name string) ([]*resource.Type, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE ?1 = '' OR name = ?1 ORDER BY name, version, id`, name)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []*resource.Type{}
	for rows.Next() {
		t, err := scanType(rows, nil)
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
	err = s.write(ctx, req.DryRun, func(tx *wtx) error {
		var policy []byte
		cur, err := scanType(tx.QueryRowContext(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE id = ?`, req.ID), &policy)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("resource type %d not found", req.ID)
		}
		if err != nil {
			return err
		}
		u := storage.ApplyTypeUpdate(cur, policy, req, schema)
		if u.Same {
			out = cur
			return nil
		}
		rev, err := tx.takeVersion(ctx)
		if err != nil {
			return err
		}
		out, err = scanType(tx.QueryRowContext(ctx, `UPDATE resource_types SET description = ?, schema = ?, resource_version = ?, updated_at = ?,
			reconcile_policy = ? WHERE id = ? RETURNING `+typeColumns, u.Description, string(u.Schema), rev, micros(tx.now), policyText(u.Policy), req.ID), nil)
		return err
	})
	return out, err
}

// DeleteType removes a resource type that no resource uses. Writers are
// serialized, so no create of one of its resources can be in flight.
func (s *Store) DeleteType(ctx context.Context, id int64, dryRun bool) error {
	return s.write(ctx, dryRun, func(tx *wtx) error {
		var name, version string
		err := tx.QueryRowContext(ctx, `SELECT name, version FROM resource_types WHERE id = ?`, id).Scan(&name, &version)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("resource type %d not found", id)
		}
		if err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM resources WHERE resource_type_id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return storage.InUse(name, version, n)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM resource_types WHERE id = ?`, id)
		return err
	})
}
