package litestore

// Namespaces. Writers are serialized on the write lock, so a create reads its
// namespace in its own transaction and a namespace's deletion cannot
// interleave with it: a create commits before the namespace turns
// terminating (and its resource is then deleted with the others), or finds it
// terminating and is refused.

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

const namespaceColumns = `name, uid, resource_version, created_at, updated_at, deleted_at`

func scanNamespace(row scanner) (*resource.Namespace, error) {
	var n resource.Namespace
	var created, updated int64
	var deleted sql.NullInt64
	if err := row.Scan(&n.Name, &n.UID, &n.ResourceVersion, &created, &updated, &deleted); err != nil {
		return nil, err
	}
	n.CreatedAt, n.UpdatedAt, n.DeletedAt = timeOf(created), timeOf(updated), timeOrNil(deleted)
	n.Status = resource.NamespaceActive
	if n.DeletedAt != nil {
		n.Status = resource.NamespaceTerminating
	}
	return &n, nil
}

// checkNamespace applies storage.CheckNamespace to a create's namespace,
// read in its write transaction.
func checkNamespace(ctx context.Context, tx *wtx, ns string) error {
	var deleted sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT deleted_at FROM namespaces WHERE name = ?`, ns).Scan(&deleted)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.CheckNamespace(ns, false, false)
	}
	if err != nil {
		return err
	}
	return storage.CheckNamespace(ns, true, deleted.Valid)
}

// checkOwners applies storage.CheckOwners to a create's owner references.
func checkOwners(ctx context.Context, tx *wtx, r *resource.Resource) error {
	uids := storage.OwnerUIDs(r)
	if len(uids) == 0 {
		return nil
	}
	args := make([]any, len(uids))
	for i, u := range uids {
		args[i] = u
	}
	rows, err := tx.QueryContext(ctx, `SELECT uid, namespace FROM resources WHERE uid IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(uids)), ", ")+`)`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	found := map[string]string{}
	for rows.Next() {
		var uid, ns string
		if err := rows.Scan(&uid, &ns); err != nil {
			return err
		}
		found[uid] = ns
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return storage.CheckOwners(r, found)
}

// CreateNamespace creates an active namespace.
func (s *Store) CreateNamespace(ctx context.Context, name string, dryRun bool) (*resource.Namespace, error) {
	n, err := storage.NewNamespace(name)
	if err != nil {
		return nil, err
	}
	err = s.write(ctx, dryRun, func(tx *wtx) error {
		cur, err := scanNamespace(tx.QueryRowContext(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE name = ?`, name))
		if err == nil {
			return storage.NamespaceExists(cur)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		rev, err := tx.takeVersion(ctx)
		if err != nil {
			return err
		}
		n, err = scanNamespace(tx.QueryRowContext(ctx, `INSERT INTO namespaces (name, uid, resource_version, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?) RETURNING `+namespaceColumns, n.Name, n.UID, rev, micros(tx.now), micros(tx.now)))
		return err
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// GetNamespace returns a namespace.
func (s *Store) GetNamespace(ctx context.Context, name string) (*resource.Namespace, error) {
	n, err := scanNamespace(s.r.QueryRowContext(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storage.NamespaceNotFoundErr(name)
	}
	return n, translate(err)
}

// ListNamespaces lists every namespace by name.
func (s *Store) ListNamespaces(ctx context.Context) ([]*resource.Namespace, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+namespaceColumns+` FROM namespaces ORDER BY name`)
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

// DeleteNamespace marks a namespace terminating, then finalizes it
// (storage.FinalizeNamespace).
func (s *Store) DeleteNamespace(ctx context.Context, name string, dryRun bool) (*storage.DeleteNamespaceResult, error) {
	if err := storage.CheckDeleteNamespace(name); err != nil {
		return nil, err
	}
	var n *resource.Namespace
	err := s.write(ctx, dryRun, func(tx *wtx) error {
		var err error
		n, err = scanNamespace(tx.QueryRowContext(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE name = ?`, name))
		if errors.Is(err, sql.ErrNoRows) {
			return storage.NamespaceNotFoundErr(name)
		}
		if err != nil || n.DeletedAt != nil {
			return err
		}
		rev, err := tx.takeVersion(ctx)
		if err != nil {
			return err
		}
		storage.MarkTerminating(n, tx.now)
		n.ResourceVersion = rev
		_, err = tx.ExecContext(ctx, `UPDATE namespaces SET deleted_at = ?, updated_at = ?, resource_version = ? WHERE name = ?`,
			micros(tx.now), micros(tx.now), rev, name)
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
			rows, err := s.r.QueryContext(ctx, `SELECT id FROM resources WHERE namespace = ? AND id > ? AND deleted_at IS NULL ORDER BY id LIMIT ?`,
				name, after, limit)
			if err != nil {
				return nil, translate(err)
			}
			defer rows.Close()
			var ids []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return nil, translate(err)
				}
				ids = append(ids, id)
			}
			return ids, translate(rows.Err())
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
			if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM resources WHERE namespace = ?)`, name).Scan(&left); err != nil {
				return nil, translate(err)
			}
			if left {
				return res, nil
			}
			err := s.write(ctx, false, func(tx *wtx) error {
				n, err := scanNamespace(tx.QueryRowContext(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE name = ?`, name))
				if errors.Is(err, sql.ErrNoRows) {
					res.Purged = true
					return nil
				}
				if err != nil {
					return err
				}
				res.Namespace = n
				var left bool
				if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM resources WHERE namespace = ?)`, name).Scan(&left); err != nil {
					return err
				}
				if left || n.DeletedAt == nil {
					return nil
				}
				res.Purged = true
				_, err = tx.ExecContext(ctx, `DELETE FROM namespaces WHERE name = ?`, name)
				return err
			})
			if err != nil {
				return nil, err
			}
			return res, nil
		},
	})
}
