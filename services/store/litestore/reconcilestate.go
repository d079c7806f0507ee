package litestore

// The scheduler's view of the store: the reconcile state of resources, in
// pages by id or by ids, read in one snapshot with the relay's published
// revision (storage.StateOf computes the flags from the document).

import (
	"context"
	"database/sql"
	"strings"

	"github.com/no8s/no8s/services/store/storage"
)

// ListReconcileState returns the reconcile state of resources by ascending
// id, after AfterID, or of the resources named in IDs.
func (s *Store) ListReconcileState(ctx context.Context, req storage.ListReconcileStateRequest) (*storage.ListReconcileStateResult, error) {
	limit, err := storage.StatePage(req)
	if err != nil {
		return nil, err
	}
	query := `SELECT ` + prefixed("r.", resourceColumns) + `, ` + prefixed("r.", reconcileColumns) + `, t.reconcile_policy, r.dependencies, r.lease_revision
		FROM resources r LEFT JOIN resource_types t ON t.id = r.resource_type_id WHERE r.id > ?`
	args := []any{req.AfterID}
	if len(req.IDs) > 0 {
		query += ` AND r.id IN (SELECT value FROM json_each(?))`
		ids, err := jsonText(req.IDs)
		if err != nil {
			return nil, err
		}
		args = append(args, ids)
	}
	query += ` ORDER BY r.id LIMIT ?`
	args = append(args, limit)
	out := &storage.ListReconcileStateResult{States: []storage.ReconcileState{}}
	err = s.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT published_revision FROM relay_state WHERE id = 1`).Scan(&out.ResourceVersion); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var lr leaseRow
			var policy sql.NullString
			var deps string
			var leaseRev int64
			r, err := scanResource(rows, append(lr.dest(), &policy, &deps, &leaseRev)...)
			if err != nil {
				return err
			}
			l := lr.finish(clock())
			st := storage.StateOf(r, l, timeOrNil(lr.dispatched), timeOrNil(lr.requeue), policyBytes(policy))
			st.Dependencies, st.LeaseRevision = storage.DecodeDependencies([]byte(deps)), leaseRev
			out.States = append(out.States, st)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// prefixed qualifies every column of a column list with prefix.
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
