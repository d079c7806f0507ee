package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// ListDependents returns the resources whose owner references name
// req.OwnerUID, by ascending id: a containment query that the GIN index
// resources_owner_references answers.
func (s *Store) ListDependents(ctx context.Context, req storage.ListDependentsRequest) ([]*resource.Resource, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+resourceColumns+` FROM resources
		WHERE owner_references @> jsonb_build_array(jsonb_build_object('uid', $1::text)) AND id > $2
		ORDER BY id LIMIT $3`, req.OwnerUID, req.AfterID, storage.OwnerPage(req.Limit))
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*resource.Resource, error) { return scanResource(row) })
	return out, translate(err)
}

// ListDangling returns the next page of the sweep: the resources with owner
// references (the partial index resources_owned) and the owners they name,
// read in one snapshot, judged by storage.DanglingOf.
func (s *Store) ListDangling(ctx context.Context, req storage.ListDanglingRequest) (*storage.DanglingPage, error) {
	limit := storage.OwnerPage(req.Limit)
	var page *storage.DanglingPage
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+resourceColumns+` FROM resources
			WHERE owner_references <> '[]'::jsonb AND id > $1 ORDER BY id LIMIT $2`, req.AfterID, limit)
		if err != nil {
			return err
		}
		scanned, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*resource.Resource, error) { return scanResource(row) })
		if err != nil {
			return err
		}
		live := map[string]storage.OwnerIdentity{}
		if uids := storage.OwnerUIDsOf(scanned); len(uids) > 0 {
			rows, err := tx.Query(ctx, `SELECT uid::text, resource_type_name, resource_type_version, name FROM resources WHERE uid = ANY($1::uuid[])`, uids)
			if err != nil {
				return err
			}
			var o storage.OwnerIdentity
			if _, err := pgx.ForEachRow(rows, []any{&o.UID, &o.TypeName, &o.TypeVersion, &o.Name}, func() error { live[o.UID] = o; return nil }); err != nil {
				return err
			}
		}
		page = storage.DanglingOf(scanned, live, limit)
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return page, nil
}

// ListPropagating returns the deleting resources that carry a propagation
// finalizer, by ascending id.
func (s *Store) ListPropagating(ctx context.Context, afterID int64, limit int) ([]*resource.Resource, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+resourceColumns+` FROM resources
		WHERE deleted_at IS NOT NULL AND finalizers ?| $1 AND id > $2 ORDER BY id LIMIT $3`,
		[]string{lifecycle.FinalizerForeground, lifecycle.FinalizerOrphan}, afterID, storage.OwnerPage(limit))
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*resource.Resource, error) { return scanResource(row) })
	return out, translate(err)
}
