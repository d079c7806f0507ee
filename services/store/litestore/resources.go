package litestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// CreateResource stores a new resource and its CREATED event.
func (s *Store) CreateResource(ctx context.Context, req storage.CreateResourceRequest) (*resource.Resource, error) {
	r, err := storage.NewResource(req.Resource)
	if err != nil {
		return nil, err
	}
	err = s.write(ctx, req.DryRun, func(tx *wtx) error {
		var typeID, typeRev int64
		err := tx.QueryRowContext(ctx, `SELECT id, resource_version FROM resource_types WHERE name = ? AND version = ?`,
			r.ResourceTypeName, r.ResourceTypeVersion).Scan(&typeID, &typeRev)
		if errors.Is(err, sql.ErrNoRows) {
			return storage.UnknownType(r.ResourceTypeName, r.ResourceTypeVersion)
		}
		if err != nil {
			return err
		}
		if err := checkNamespace(ctx, tx, r.Namespace); err != nil {
			return err
		}
		if err := checkOwners(ctx, tx, r); err != nil {
			return err
		}
		if req.SchemaRevision != 0 && req.SchemaRevision != typeRev {
			return storage.SchemaChanged(r.ResourceTypeName, r.ResourceTypeVersion)
		}
		if r.ID, err = tx.nextResourceID(ctx); err != nil {
			return err
		}
		r.CreatedAt = tx.now
		return tx.emit(ctx, change{event: envelope.Created, r: r, write: func(ctx context.Context, tx *wtx) error {
			v, err := encodeJSON(r.Labels, r.Annotations, r.OwnerReferences, r.Finalizers)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO resources (id, uid, namespace, name, resource_type_id, resource_type_name, resource_type_version, labels,
				annotations, owner_references, spec, status, generation, resource_version, phase, finalizers, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.ID, r.UID, r.Namespace, r.Name, typeID, r.ResourceTypeName, r.ResourceTypeVersion, v[0], v[1], v[2], string(r.Spec), r.Status,
				r.Generation, r.ResourceVersion, r.Phase, v[3], micros(r.CreatedAt), micros(r.UpdatedAt))
			return err
		}})
	})
	if err != nil {
		if errors.Is(err, storage.ErrNameTaken) {
			return nil, storage.NameTaken(r)
		}
		return nil, err
	}
	if req.DryRun {
		r.ID, r.ResourceVersion = 0, 0
	}
	return r, nil
}

// encodeJSON encodes each value as stored JSON text.
func encodeJSON(vs ...any) ([]string, error) {
	out := make([]string, len(vs))
	for i, v := range vs {
		t, err := jsonText(v)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// GetResource returns a resource.
func (s *Store) GetResource(ctx context.Context, key storage.ResourceKey) (*resource.Resource, error) {
	var row *sql.Row
	if key.ID != 0 {
		row = s.r.QueryRowContext(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = ?`, key.ID)
	} else {
		row = s.r.QueryRowContext(ctx, `SELECT `+resourceColumns+` FROM resources
			WHERE resource_type_name = ? AND resource_type_version = ? AND namespace = ? AND name = ?`,
			key.ResourceTypeName, key.ResourceTypeVersion, names.OrDefault(key.Namespace), key.Name)
	}
	r, err := scanResource(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("%s not found", key)
	}
	return r, translate(err)
}

// lockResource reads a resource in a write transaction (the write lock is
// the row lock) and checks the precondition.
func lockResource(ctx context.Context, tx *wtx, id, expected int64) (*resource.Resource, error) {
	r, err := scanResource(tx.QueryRowContext(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("resource %d not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := storage.CheckVersion(r, expected); err != nil {
		return nil, err
	}
	return r, nil
}

// UpdateResource applies an update, bumping generation when the spec changes.
// An update that changes nothing writes nothing and returns the resource.
func (s *Store) UpdateResource(ctx context.Context, req storage.UpdateResourceRequest) (*resource.Resource, error) {
	spec, err := req.ValidSpec()
	if err != nil {
		return nil, err
	}
	var r *resource.Resource
	err = s.write(ctx, req.DryRun, func(tx *wtx) error {
		var err error
		if r, err = lockResource(ctx, tx, req.ID, req.ExpectedResourceVersion); err != nil {
			return err
		}
		changed, specChanged, err := storage.ApplyUpdate(r, req, spec, func() (int64, error) {
			var rev int64
			err := tx.QueryRowContext(ctx, `SELECT resource_version FROM resource_types WHERE name = ? AND version = ?`,
				r.ResourceTypeName, r.ResourceTypeVersion).Scan(&rev)
			return rev, err
		})
		if err != nil || !changed {
			return err
		}
		if req.SetOwnerReferences {
			if err := checkOwners(ctx, tx, r); err != nil {
				return err
			}
		}
		return tx.emit(ctx, change{event: envelope.Modified, r: r, write: func(ctx context.Context, tx *wtx) error {
			v, err := encodeJSON(r.Labels, r.Annotations, r.OwnerReferences)
			if err != nil {
				return err
			}
			// A spec change resets the reconcile backoff (docs/design/reconcile.md).
			_, err = tx.ExecContext(ctx, `UPDATE resources SET spec = ?, labels = ?, annotations = ?, owner_references = ?, generation = ?, resource_version = ?, updated_at = ?,
				failures = CASE WHEN ? THEN 0 ELSE failures END WHERE id = ?`,
				string(r.Spec), v[0], v[1], v[2], r.Generation, r.ResourceVersion, micros(r.UpdatedAt), specChanged, r.ID)
			return err
		}})
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// DeleteResource requests deletion: the resource becomes deleting (DELETED
// event) and, when it has no finalizers, is removed at once (PURGED event).
// Deleting a resource that is already deleting changes nothing.
func (s *Store) DeleteResource(ctx context.Context, req storage.DeleteResourceRequest) (*storage.DeleteResult, error) {
	p, err := req.ValidPropagation()
	if err != nil {
		return nil, err
	}
	var res storage.DeleteResult
	err = s.write(ctx, req.DryRun, func(tx *wtx) error {
		r, err := lockResource(ctx, tx, req.ID, req.ExpectedResourceVersion)
		if err != nil {
			return err
		}
		res.Resource = r
		if r.DeletedAt != nil {
			return nil
		}
		now := tx.now
		if storage.MarkDeleting(r, now, p) {
			// DELETED, then PURGED: the row goes at once.
			if err := tx.emit(ctx, change{event: envelope.Deleted, r: r, unbounded: true}); err != nil {
				return err
			}
			purged := *r
			res.Resource, res.Purged = &purged, true
			return tx.emit(ctx, change{event: envelope.Purged, r: &purged, unbounded: true, write: deleteRow(r.ID)})
		}
		return tx.emit(ctx, change{event: envelope.Deleted, r: r, unbounded: true, write: func(ctx context.Context, tx *wtx) error {
			// Deletion is dispatched at once: earlier failures' backoff and
			// a requeue the live resource asked for are reset.
			fins, err := jsonText(r.Finalizers)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE resources SET status = ?, phase = ?, deleted_at = ?, updated_at = ?, resource_version = ?,
				failures = 0, terminal_generation = 0, requeue_at = NULL, finalizers = ? WHERE id = ?`,
				r.Status, r.Phase, micros(now), micros(now), r.ResourceVersion, fins, r.ID)
			return err
		}})
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// deleteRow is the write of a PURGED change: the row goes, and its history
// with it (ON DELETE CASCADE).
func deleteRow(id int64) func(ctx context.Context, tx *wtx) error {
	return func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM resources WHERE id = ?`, id)
		return err
	}
}

// UpdateFinalizers adds and removes finalizers. While a resource is deleting,
// finalizers may be removed but not added; removing the last one purges it.
func (s *Store) UpdateFinalizers(ctx context.Context, req storage.UpdateFinalizersRequest) (*storage.DeleteResult, error) {
	if err := storage.ValidateFinalizerChange(req); err != nil {
		return nil, err
	}
	var res storage.DeleteResult
	err := s.write(ctx, req.DryRun, func(tx *wtx) error {
		r, err := lockResource(ctx, tx, req.ID, req.ExpectedResourceVersion)
		if err != nil {
			return err
		}
		res.Resource = r
		changed, purge, err := storage.ApplyFinalizers(r, req)
		if err != nil || !changed {
			return err
		}
		if purge {
			res.Purged = true
			return tx.emit(ctx, change{event: envelope.Purged, r: r, write: deleteRow(r.ID)})
		}
		return tx.emit(ctx, change{event: envelope.Modified, r: r, write: func(ctx context.Context, tx *wtx) error {
			fins, err := jsonText(r.Finalizers)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE resources SET finalizers = ?, resource_version = ?, updated_at = ? WHERE id = ?`,
				fins, r.ResourceVersion, micros(r.UpdatedAt), r.ID)
			return err
		}})
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}
