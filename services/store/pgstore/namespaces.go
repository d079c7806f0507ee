package pgstore

// Namespaces. A create of a resource takes a transaction-level advisory lock
// on its namespace's name, shared, and reads the namespace in the same
// round trip; a namespace's deletion takes it exclusive before it marks the
// namespace terminating. So a create either commits before the namespace
// turns terminating (and its resource is then deleted with the others) or
// finds it terminating and is refused: nothing is created in a namespace
// being deleted. The shared lock, as for types (00002), keeps concurrent
// creates in one namespace from queueing on one row lock.

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// namespaceLockSQL and namespaceLockExclusiveSQL take the advisory lock of
// a namespace's name (seed 8: a key space apart from the types' locks).
const (
	namespaceLockSQL          = `SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 8))`
	namespaceLockExclusiveSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 8))`
)

const namespaceColumns = `name, uid, resource_version, created_at, updated_at, deleted_at`

func scanNamespace(row pgx.Row) (*resource.Namespace, error) {
	var n resource.Namespace
	var uid uuid.UUID
	if err := row.Scan(&n.Name, &uid, &n.ResourceVersion, &n.CreatedAt, &n.UpdatedAt, &n.DeletedAt); err != nil {
		return nil, err
	}
	n.UID = uid.String()
	n.CreatedAt, n.UpdatedAt = n.CreatedAt.UTC(), n.UpdatedAt.UTC()
	n.Status = resource.NamespaceActive
	if n.DeletedAt != nil {
		t := n.DeletedAt.UTC()
		n.DeletedAt, n.Status = &t, resource.NamespaceTerminating
	}
	return &n, nil
}

// queueNamespaceCheck queues, into a create's read batch, the shared lock
// of the namespace and the read of its state; scanNamespaceCheck reads them
// and applies storage.CheckNamespace.
func queueNamespaceCheck(b *pgx.Batch, ns string) {
	b.Queue(namespaceLockSQL, ns)
	b.Queue(`SELECT deleted_at IS NOT NULL FROM namespaces WHERE name = $1`, ns)
}

func scanNamespaceCheck(br pgx.BatchResults, ns string) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	var terminating bool
	err := br.QueryRow().Scan(&terminating)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.CheckNamespace(ns, false, false)
	}
	if err != nil {
		return err
	}
	return storage.CheckNamespace(ns, true, terminating)
}

// CreateNamespace creates an active namespace.
func (s *Store) CreateNamespace(ctx context.Context, name string, dryRun bool) (*resource.Namespace, error) {
	n, err := storage.NewNamespace(name)
	if err != nil {
		return nil, err
	}
	err = s.write(ctx, dryRun, func(tx pgx.Tx) error {
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err := scanNamespace(tx.QueryRow(ctx, `INSERT INTO namespaces (name, uid, resource_version, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $4) ON CONFLICT (name) DO NOTHING RETURNING `+namespaceColumns, n.Name, n.UID, rev, now))
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err := scanNamespace(tx.QueryRow(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE name = $1`, n.Name))
			if err != nil {
				return err
			}
			return storage.NamespaceExists(cur)
		}
		n = out
		return err
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// GetNamespace returns a namespace.
func (s *Store) GetNamespace(ctx context.Context, name string) (*resource.Namespace, error) {
	n, err := scanNamespace(s.pool.QueryRow(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.NamespaceNotFoundErr(name)
	}
	return n, translate(err)
}

// ListNamespaces lists every namespace by name.
func (s *Store) ListNamespaces(ctx context.Context) ([]*resource.Namespace, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+namespaceColumns+` FROM namespaces ORDER BY name`)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []*resource.Namespace{}
	for rows.Next() {
		n, err := scanNamespace(rows)
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, n)
	}
	return out, translate(rows.Err())
}

// DeleteNamespace marks a namespace terminating, after the creates in flight
// in it, then finalizes it (storage.FinalizeNamespace).
func (s *Store) DeleteNamespace(ctx context.Context, name string, dryRun bool) (*storage.DeleteNamespaceResult, error) {
	if err := storage.CheckDeleteNamespace(name); err != nil {
		return nil, err
	}
	var n *resource.Namespace
	err := s.write(ctx, dryRun, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, namespaceLockExclusiveSQL, name); err != nil {
			return err
		}
		var err error
		n, err = scanNamespace(tx.QueryRow(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE name = $1 FOR UPDATE`, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.NamespaceNotFoundErr(name)
		}
		if err != nil || n.DeletedAt != nil {
			return err
		}
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		storage.MarkTerminating(n, now)
		n.ResourceVersion = rev
		_, err = tx.Exec(ctx, `UPDATE namespaces SET deleted_at = $2, updated_at = $2, resource_version = $3 WHERE name = $1`, name, now, rev)
		return err
	})
	if err != nil {
		return nil, err
	}
	if dryRun {
		return &storage.DeleteNamespaceResult{Namespace: n}, nil
	}
	return s.FinalizeNamespace(ctx, name)
}

// FinalizeNamespace advances the deletion of a terminating namespace
// (storage.FinalizeNamespace).
func (s *Store) FinalizeNamespace(ctx context.Context, name string) (*storage.DeleteNamespaceResult, error) {
	cur, err := s.GetNamespace(ctx, name)
	if err != nil {
		return nil, err
	}
	if cur.DeletedAt == nil {
		return &storage.DeleteNamespaceResult{Namespace: cur}, nil
	}
	return storage.FinalizeNamespace(ctx, storage.NamespaceSteps{
		Live: func(ctx context.Context, after int64, limit int) ([]int64, error) {
			rows, err := s.pool.Query(ctx, `SELECT id FROM resources WHERE namespace = $1 AND id > $2 AND deleted_at IS NULL ORDER BY id LIMIT $3`,
				name, after, limit)
			if err != nil {
				return nil, translate(err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			return ids, translate(err)
		},
		Delete: func(ctx context.Context, id int64) error {
			_, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: id})
			return err
		},
		Purge: func(ctx context.Context) (*storage.DeleteNamespaceResult, error) {
			res := &storage.DeleteNamespaceResult{Namespace: cur}
			// A read first: a namespace waiting for finalizers (the sweep
			// asks every second) costs no write transaction. Resources only
			// leave a terminating namespace, so empty stays empty.
			var left bool
			if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM resources WHERE namespace = $1)`, name).Scan(&left); err != nil {
				return nil, translate(err)
			}
			if left {
				return res, nil
			}
			err := s.write(ctx, false, func(tx pgx.Tx) error {
				n, err := scanNamespace(tx.QueryRow(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE name = $1 FOR UPDATE`, name))
				if errors.Is(err, pgx.ErrNoRows) {
					// Another store's sweep removed it meanwhile.
					res.Purged = true
					return nil
				}
				if err != nil {
					return err
				}
				res.Namespace = n
				var left bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM resources WHERE namespace = $1)`, name).Scan(&left); err != nil {
					return err
				}
				if left || n.DeletedAt == nil {
					return nil
				}
				res.Purged = true
				_, err = tx.Exec(ctx, `DELETE FROM namespaces WHERE name = $1`, name)
				return err
			})
			if err != nil {
				return nil, err
			}
			return res, nil
		},
	})
}
