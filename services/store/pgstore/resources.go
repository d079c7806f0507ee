package pgstore

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

const resourceColumns = `id, uid, namespace, name, resource_type_name, resource_type_version, labels, annotations,
	owner_references, spec, status, status_message, generation, observed_generation, resource_version,
	conditions, phase, outputs, finalizers, created_at, updated_at, deleted_at, last_reconcile_time`

func scanResource(row pgx.Row) (*resource.Resource, error) {
	var r resource.Resource
	var uid uuid.UUID
	var spec, outputs []byte
	var c storage.StoredCollections
	if err := row.Scan(&r.ID, &uid, &r.Namespace, &r.Name, &r.ResourceTypeName, &r.ResourceTypeVersion, &c.Labels, &c.Annotations,
		&c.Owners, &spec, &r.Status, &r.StatusMessage, &r.Generation, &r.ObservedGeneration, &r.ResourceVersion,
		&c.Conditions, &r.Phase, &outputs, &c.Finalizers, &r.CreatedAt, &r.UpdatedAt, &r.DeletedAt, &r.LastReconcileTime); err != nil {
		return nil, err
	}
	if err := c.Decode(&r); err != nil {
		return nil, err
	}
	r.UID = uid.String()
	r.Spec = storage.CompactJSON(spec)
	r.Outputs = storage.CompactJSON(outputs)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if r.DeletedAt != nil {
		t := r.DeletedAt.UTC()
		r.DeletedAt = &t
	}
	if r.LastReconcileTime != nil {
		t := r.LastReconcileTime.UTC()
		r.LastReconcileTime = &t
	}
	r.Normalize()
	return &r, nil
}

// CreateResource stores a new resource and its CREATED event.
func (s *Store) CreateResource(ctx context.Context, req storage.CreateResourceRequest) (*resource.Resource, error) {
	r, err := storage.NewResource(req.Resource)
	if err != nil {
		return nil, err
	}
	var typeID, typeRev int64
	var rv *revisions
	owners := storage.OwnerUIDs(r)
	ownerNS := map[string]string{}
	err = s.pipelinedWrite(ctx, req.DryRun, nameKey(r), 0, func(b *pgx.Batch) {
		b.Queue(typeLockSQL, r.ResourceTypeName, r.ResourceTypeVersion)
		b.Queue(`SELECT id, resource_version FROM resource_types WHERE name = $1 AND version = $2`, r.ResourceTypeName, r.ResourceTypeVersion)
		queueNamespaceCheck(b, r.Namespace)
		if len(owners) > 0 {
			b.Queue(`SELECT uid::text, namespace FROM resources WHERE uid = ANY($1::uuid[])`, owners)
		}
		queueRevisions(b, 1)
		b.Queue(`SELECT nextval('resources_id_seq')`)
	}, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		err := br.QueryRow().Scan(&typeID, &typeRev)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.UnknownType(r.ResourceTypeName, r.ResourceTypeVersion)
		}
		if err != nil {
			return err
		}
		if err := scanNamespaceCheck(br, r.Namespace); err != nil {
			return err
		}
		if len(owners) > 0 {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			var uid, ns string
			_, err = pgx.ForEachRow(rows, []any{&uid, &ns}, func() error { ownerNS[uid] = ns; return nil })
			if err != nil {
				return err
			}
		}
		if rv, err = scanRevisions(ctx, br, 1); err != nil {
			return err
		}
		return br.QueryRow().Scan(&r.ID)
	}, func(b *pgx.Batch) error {
		if err := storage.CheckOwners(r, ownerNS); err != nil {
			return err
		}
		if req.SchemaRevision != 0 && req.SchemaRevision != typeRev {
			return storage.SchemaChanged(r.ResourceTypeName, r.ResourceTypeVersion)
		}
		r.CreatedAt = rv.now
		return rv.emit(b, change{event: envelope.Created, r: r, write: func(b *pgx.Batch, doc []byte) {
			b.Queue(`INSERT INTO resources (id, uid, namespace, name, resource_type_id, resource_type_name, resource_type_version, labels, annotations,
				owner_references, spec, status, generation, resource_version, phase, finalizers, created_at, updated_at, document, document_version)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $14)`,
				r.ID, r.UID, r.Namespace, r.Name, typeID, r.ResourceTypeName, r.ResourceTypeVersion, jsonMap(r.Labels), jsonMap(r.Annotations),
				resource.AppendOwnerReferences(nil, r.OwnerReferences), []byte(r.Spec), r.Status, r.Generation, r.ResourceVersion, r.Phase,
				resource.AppendStrings(nil, r.Finalizers), r.CreatedAt, r.UpdatedAt, doc)
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

// GetResource returns a resource.
func (s *Store) GetResource(ctx context.Context, key storage.ResourceKey) (*resource.Resource, error) {
	var row pgx.Row
	if key.ID != 0 {
		row = s.pool.QueryRow(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = $1`, key.ID)
	} else {
		// Only the name is indexable here: the unique index (name,
		// namespace, type, version) serves the read whatever the
		// planner's statistics (migration 00007).
		row = s.pool.QueryRow(ctx, `SELECT `+resourceColumns+` FROM resources
			WHERE (resource_type_name || '') = $1 AND (resource_type_version || '') = $2 AND (namespace || '') = $3 AND name = $4`,
			key.ResourceTypeName, key.ResourceTypeVersion, names.OrDefault(key.Namespace), key.Name)
	}
	r, err := scanResource(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.NotFound("%s not found", key)
	}
	return r, translate(err)
}

// lockResource reads a resource for update and checks the precondition.
func lockResource(ctx context.Context, tx pgx.Tx, id, expected int64) (*resource.Resource, error) {
	r, err := scanResource(tx.QueryRow(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.NotFound("resource %d not found", id)
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
	err = s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
		var err error
		if r, err = lockResource(ctx, tx, req.ID, req.ExpectedResourceVersion); err != nil {
			return err
		}
		changed, specChanged, err := storage.ApplyUpdate(r, req, spec, func() (int64, error) {
			var typeRev int64
			// No lock: a type cannot be deleted while this resource exists,
			// and a schema change committing meanwhile orders after us.
			err := tx.QueryRow(ctx, `SELECT resource_version FROM resource_types WHERE name = $1 AND version = $2`,
				r.ResourceTypeName, r.ResourceTypeVersion).Scan(&typeRev)
			return typeRev, err
		})
		if err != nil || !changed {
			return err
		}
		if req.SetOwnerReferences {
			if err := checkOwnersTx(ctx, tx, r); err != nil {
				return err
			}
		}
		return emitTx(ctx, tx, change{event: envelope.Modified, r: r, write: func(b *pgx.Batch, doc []byte) {
			// A spec change resets the reconcile backoff (docs/design/reconcile.md).
			b.Queue(`UPDATE resources SET spec = $2, labels = $3, annotations = $4, owner_references = $9, generation = $5, resource_version = $6, updated_at = $7,
				failures = CASE WHEN $8 THEN 0 ELSE failures END, document = $10, document_version = $6 WHERE id = $1`,
				r.ID, []byte(r.Spec), r.Labels, r.Annotations, r.Generation, r.ResourceVersion, r.UpdatedAt, specChanged,
				resource.AppendOwnerReferences(nil, r.OwnerReferences), doc)
		}})
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// DeleteResource requests deletion: the resource becomes deleting (DELETED
// event), carrying its propagation policy's finalizer, and, when it has no
// finalizers, is removed at once (PURGED event). Deleting a resource that
// is already deleting changes nothing.
func (s *Store) DeleteResource(ctx context.Context, req storage.DeleteResourceRequest) (*storage.DeleteResult, error) {
	p, err := req.ValidPropagation()
	if err != nil {
		return nil, err
	}
	var res storage.DeleteResult
	err = s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
		r, err := lockResource(ctx, tx, req.ID, req.ExpectedResourceVersion)
		if err != nil {
			return err
		}
		res.Resource = r
		if r.DeletedAt != nil {
			return nil
		}
		n := 1
		if len(r.Finalizers) == 0 && p.Finalizer() == "" {
			n = 2
		}
		rv, err := takeRevisions(ctx, tx, n)
		if err != nil {
			return err
		}
		now := rv.now
		purge := storage.MarkDeleting(r, now, p)
		b := &pgx.Batch{}
		if purge {
			// DELETED, then PURGED: the row goes at once.
			if err := rv.emit(b, change{event: envelope.Deleted, r: r, unbounded: true}); err != nil {
				return err
			}
			purged := *r
			err := rv.emit(b, change{event: envelope.Purged, r: &purged, unbounded: true, write: func(b *pgx.Batch, _ []byte) {
				b.Queue(`DELETE FROM resources WHERE id = $1 AND finalizers = '[]'::jsonb`, r.ID)
			}})
			if err != nil {
				return err
			}
			res.Resource, res.Purged = &purged, true
		} else {
			err := rv.emit(b, change{event: envelope.Deleted, r: r, unbounded: true, write: func(b *pgx.Batch, doc []byte) {
				// Deletion is dispatched at once: earlier failures' backoff
				// and a requeue the live resource asked for are reset.
				b.Queue(`UPDATE resources SET status = $2, phase = $3, deleted_at = $4, updated_at = $4, resource_version = $5,
					failures = 0, terminal_generation = 0, requeue_at = NULL, finalizers = $6, document = $7, document_version = $5 WHERE id = $1`,
					r.ID, r.Status, r.Phase, now, r.ResourceVersion, r.Finalizers, doc)
			}})
			if err != nil {
				return err
			}
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// UpdateFinalizers adds and removes finalizers. While a resource is deleting,
// finalizers may be removed but not added; removing the last one purges it.
func (s *Store) UpdateFinalizers(ctx context.Context, req storage.UpdateFinalizersRequest) (*storage.DeleteResult, error) {
	if err := storage.ValidateFinalizerChange(req); err != nil {
		return nil, err
	}
	var res storage.DeleteResult
	err := s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
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
			return emitTx(ctx, tx, change{event: envelope.Purged, r: r, write: func(b *pgx.Batch, _ []byte) {
				b.Queue(`DELETE FROM resources WHERE id = $1`, r.ID)
			}})
		}
		return emitTx(ctx, tx, change{event: envelope.Modified, r: r, write: func(b *pgx.Batch, doc []byte) {
			b.Queue(`UPDATE resources SET finalizers = $2, resource_version = $3, updated_at = $4, document = $5, document_version = $3 WHERE id = $1`,
				r.ID, r.Finalizers, r.ResourceVersion, r.UpdatedAt, doc)
		}})
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// checkOwnersTx applies storage.CheckOwners to an update's owner references,
// reading the owners' namespaces in tx.
func checkOwnersTx(ctx context.Context, tx pgx.Tx, r *resource.Resource) error {
	uids := storage.OwnerUIDs(r)
	if len(uids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT uid::text, namespace FROM resources WHERE uid = ANY($1::uuid[])`, uids)
	if err != nil {
		return err
	}
	found := map[string]string{}
	var uid, ns string
	if _, err := pgx.ForEachRow(rows, []any{&uid, &ns}, func() error { found[uid] = ns; return nil }); err != nil {
		return err
	}
	return storage.CheckOwners(r, found)
}
