package litestore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// ListDependents returns the resources whose owner references name
// req.OwnerUID, by ascending id, through owner_refs (kept by triggers on
// resources).
func (s *Store) ListDependents(ctx context.Context, req storage.ListDependentsRequest) ([]*resource.Resource, error) {
	var out []*resource.Resource
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanResources(tx.QueryContext(ctx, `SELECT `+resourceColumns+` FROM resources
			WHERE id IN (SELECT resource_id FROM owner_refs WHERE owner_uid = ? AND resource_id > ?)
			ORDER BY id LIMIT ?`, req.OwnerUID, req.AfterID, storage.OwnerPage(req.Limit)))
		return err
	})
	return out, err
}

// ListDangling returns the next page of the sweep: the resources with owner
// references and the owners they name, read in one snapshot, judged by
// storage.DanglingOf.
func (s *Store) ListDangling(ctx context.Context, req storage.ListDanglingRequest) (*storage.DanglingPage, error) {
	limit := storage.OwnerPage(req.Limit)
	var page *storage.DanglingPage
	err := s.read(ctx, func(tx *sql.Tx) error {
		scanned, err := scanResources(tx.QueryContext(ctx, `SELECT `+resourceColumns+` FROM resources
			WHERE id IN (SELECT resource_id FROM owner_refs WHERE resource_id > ?) ORDER BY id LIMIT ?`, req.AfterID, limit))
		if err != nil {
			return err
		}
		live := map[string]storage.OwnerIdentity{}
		if uids := storage.OwnerUIDsOf(scanned); len(uids) > 0 {
			args := make([]any, len(uids))
			for i, u := range uids {
				args[i] = u
			}
			rows, err := tx.QueryContext(ctx, `SELECT uid, resource_type_name, resource_type_version, name FROM resources
				WHERE uid IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(uids)), ", ")+`)`, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var o storage.OwnerIdentity
				if err := rows.Scan(&o.UID, &o.TypeName, &o.TypeVersion, &o.Name); err != nil {
					return err
				}
				live[o.UID] = o
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		page = storage.DanglingOf(scanned, live, limit)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// scanResources reads every row of a resourceColumns query.
func scanResources(rows *sql.Rows, err error) ([]*resource.Resource, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*resource.Resource
	for rows.Next() {
		r, err := scanResource(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ListPropagating returns the deleting resources that carry a propagation
// finalizer, by ascending id.
func (s *Store) ListPropagating(ctx context.Context, afterID int64, limit int) ([]*resource.Resource, error) {
	var out []*resource.Resource
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanResources(tx.QueryContext(ctx, `SELECT `+resourceColumns+` FROM resources
			WHERE deleted_at IS NOT NULL AND id > ?
			AND EXISTS (SELECT 1 FROM json_each(resources.finalizers) WHERE value IN (?, ?))
			ORDER BY id LIMIT ?`, afterID, lifecycle.FinalizerForeground, lifecycle.FinalizerOrphan, storage.OwnerPage(limit)))
		return err
	})
	return out, err
}
