package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// typeLockSQL takes a transaction-level advisory lock on a type's name and
// version: shared by every create of a resource of the type, exclusive by
// the type's deletion, so a type cannot go while a create is in flight.
const typeLockSQL = `SELECT pg_advisory_xact_lock_shared(hashtextextended($1 || '/' || $2, 7))`

const typeLockExclusiveSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 7))`

const typeColumns = `id, name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy`

// MaxDescriptionBytes bounds a resource type description.
const MaxDescriptionBytes = 4096

func scanType(row pgx.Row) (*resource.Type, error) {
	var t resource.Type
	var schema, policy []byte
	if err := row.Scan(&t.ID, &t.Name, &t.Version, &t.Description, &schema, &t.ResourceVersion, &t.CreatedAt, &t.UpdatedAt, &policy); err != nil {
		return nil, err
	}
	t.Schema = compactJSON(schema)
	t.ReconcilePolicy = decodePolicy(policy).WithDefaults()
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

// CreateTypeRequest registers a resource type. The schema must already have
// been checked by admission.
type CreateTypeRequest struct {
	Name, Version, Description string
	Schema                     []byte
	// ReconcilePolicy holds the fields the type sets; zero fields take the
	// defaults.
	ReconcilePolicy resource.ReconcilePolicy
	DryRun          bool
}

func validateTypeFields(description string, schema []byte) (compacted []byte, errs []FieldError) {
	if len(description) > MaxDescriptionBytes {
		errs = append(errs, FieldError{Path: "/description", Message: fmt.Sprintf("longer than %d bytes", MaxDescriptionBytes)})
	}
	if fe := strictjson.CheckString("/description", description); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	if len(schema) > names.MaxSchemaBytes {
		errs = append(errs, FieldError{Path: "/schema", Message: fmt.Sprintf("schema is %d bytes, more than the %d allowed", len(schema), names.MaxSchemaBytes)})
		return nil, errs
	}
	c, perr := resource.CompactObject("/schema", schema)
	if perr == nil {
		perr = strictjson.Check(c, "/schema")
	}
	if perr != nil {
		errs = append(errs, fieldsOf(perr.Fields)...)
	}
	return c, errs
}

// CreateType registers a resource type.
func (s *Store) CreateType(ctx context.Context, req CreateTypeRequest) (*resource.Type, error) {
	var errs []FieldError
	if fe := names.TypeName("/name", req.Name); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	if fe := names.TypeVersion("/version", req.Version); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	schema, ferrs := validateTypeFields(req.Description, req.Schema)
	errs = append(errs, ferrs...)
	if len(req.Schema) == 0 {
		errs = append(errs, FieldError{Path: "/schema", Message: "schema is required"})
	}
	errs = append(errs, fieldsOf(req.ReconcilePolicy.Validate("/reconcile_policy"))...)
	if len(errs) > 0 {
		return nil, newError(ErrInvalid, "invalid resource type").withFields(errs...)
	}
	var out *resource.Type
	err := s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanType(tx.QueryRow(ctx, `INSERT INTO resource_types (name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy)
			VALUES ($1, $2, $3, $4, $5, $6, $6, $7) RETURNING `+typeColumns,
			req.Name, req.Version, req.Description, schema, rev, now, encodePolicy(req.ReconcilePolicy)))
		return err
	})
	if errors.Is(err, ErrNameTaken) {
		return nil, newError(ErrNameTaken, "resource type %s/%s already exists", req.Name, req.Version)
	}
	return out, err
}

// TypeKey names a type by id, or by name and version.
type TypeKey struct {
	ID            int64
	Name, Version string
}

func (k TypeKey) String() string {
	if k.ID != 0 {
		return fmt.Sprintf("resource type %d", k.ID)
	}
	return fmt.Sprintf("resource type %s/%s", k.Name, k.Version)
}

// GetType returns a resource type.
func (s *Store) GetType(ctx context.Context, key TypeKey) (*resource.Type, error) {
	var row pgx.Row
	if key.ID != 0 {
		row = s.pool.QueryRow(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE id = $1`, key.ID)
	} else {
		row = s.pool.QueryRow(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE name = $1 AND version = $2`, key.Name, key.Version)
	}
	t, err := scanType(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("%s not found", key)
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

// UpdateTypeRequest changes a type's description and/or schema. Name and
// version are immutable. Existing resources are re-validated only when next
// written.
type UpdateTypeRequest struct {
	ID          int64
	Description *string
	Schema      []byte
	// ReconcilePolicy, when set, replaces the policy (zero fields: defaults).
	ReconcilePolicy *resource.ReconcilePolicy
	DryRun          bool
}

// UpdateType changes a resource type.
func (s *Store) UpdateType(ctx context.Context, req UpdateTypeRequest) (*resource.Type, error) {
	desc := ""
	if req.Description != nil {
		desc = *req.Description
	}
	var schema []byte
	var errs []FieldError
	if len(req.Schema) > 0 {
		schema, errs = validateTypeFields(desc, req.Schema)
	} else if len(desc) > MaxDescriptionBytes {
		errs = append(errs, FieldError{Path: "/description", Message: fmt.Sprintf("longer than %d bytes", MaxDescriptionBytes)})
	}
	if req.ReconcilePolicy != nil {
		errs = append(errs, fieldsOf(req.ReconcilePolicy.Validate("/reconcile_policy"))...)
	}
	if len(errs) > 0 {
		return nil, newError(ErrInvalid, "invalid resource type").withFields(errs...)
	}
	var out *resource.Type
	err := s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
		cur, err := scanType(tx.QueryRow(ctx, `SELECT `+typeColumns+` FROM resource_types WHERE id = $1 FOR UPDATE`, req.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("resource type %d not found", req.ID)
		}
		if err != nil {
			return err
		}
		// The policy as the type set it (cur's has the defaults filled in).
		var curPolicy []byte
		if err := tx.QueryRow(ctx, `SELECT reconcile_policy FROM resource_types WHERE id = $1`, req.ID).Scan(&curPolicy); err != nil {
			return err
		}
		policy := decodePolicy(curPolicy)
		if req.ReconcilePolicy != nil {
			policy = *req.ReconcilePolicy
		}
		if req.Description == nil {
			desc = cur.Description
		}
		if schema == nil {
			schema = cur.Schema
		}
		if desc == cur.Description && strictjson.Equal(schema, cur.Schema) && policy == decodePolicy(curPolicy) {
			out = cur
			return nil
		}
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanType(tx.QueryRow(ctx, `UPDATE resource_types SET description = $2, schema = $3, resource_version = $4, updated_at = $5,
			reconcile_policy = $6 WHERE id = $1 RETURNING `+typeColumns, req.ID, desc, schema, rev, now, encodePolicy(policy)))
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
			return notFound("resource type %d not found", id)
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
			return newError(ErrInUse, "resource type %s/%s still has %d resources; delete them first", name, version, n)
		}
		_, err = tx.Exec(ctx, `DELETE FROM resource_types WHERE id = $1`, id)
		return err
	})
}

// storedPolicy is a reconcile policy as stored: only the fields a type set.
type storedPolicy struct {
	ResyncSeconds      int32 `json:"resync_seconds,omitempty"`
	BackoffBaseSeconds int32 `json:"backoff_base_seconds,omitempty"`
	BackoffMaxSeconds  int32 `json:"backoff_max_seconds,omitempty"`
	TimeoutSeconds     int32 `json:"timeout_seconds,omitempty"`
}

// encodePolicy returns the stored form of p: nil (SQL NULL) when p sets
// nothing.
func encodePolicy(p resource.ReconcilePolicy) []byte {
	if p == (resource.ReconcilePolicy{}) {
		return nil
	}
	b, _ := json.Marshal(storedPolicy(p))
	return b
}

// decodePolicy reads a stored policy; defaults are not filled in.
func decodePolicy(b []byte) resource.ReconcilePolicy {
	var sp storedPolicy
	if len(b) > 0 {
		_ = json.Unmarshal(b, &sp)
	}
	return resource.ReconcilePolicy(sp)
}
