package litestore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/no8s/no8s/services/internal/labelselector"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// labelValue is the value of the label named by the next argument, NULL
// when the resource has no such label. json_each compares keys exactly,
// whatever characters they hold.
const labelValue = `(SELECT j.value FROM json_each(resources.labels) j WHERE j.key = ?)`

// selectorSQL turns a label selector into WHERE terms with the semantics
// of labelselector.Selector.Matches (and of pgstore's jsonb operators): a
// missing label satisfies != and notin, and nothing else but !key.
func selectorSQL(sel labelselector.Selector) (terms []string, args []any) {
	for _, r := range sel {
		switch r.Operator {
		case labelselector.Equals:
			terms, args = append(terms, labelValue+" = ?"), append(args, r.Key, r.Values[0])
		case labelselector.NotEquals:
			terms, args = append(terms, labelValue+" IS NOT ?"), append(args, r.Key, r.Values[0])
		case labelselector.In, labelselector.NotIn:
			in := labelValue + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(r.Values)), ", ") + ")"
			if r.Operator == labelselector.NotIn {
				in = "NOT coalesce(" + in + ", 0)"
			}
			terms, args = append(terms, in), append(args, r.Key)
			for _, v := range r.Values {
				args = append(args, v)
			}
		case labelselector.Exists:
			terms, args = append(terms, labelValue+" IS NOT NULL"), append(args, r.Key)
		case labelselector.DoesNotExist:
			terms, args = append(terms, labelValue+" IS NULL"), append(args, r.Key)
		}
	}
	return terms, args
}

// ListResources lists resources by ascending id. The first page is read in
// one snapshot together with the relay's published revision, which becomes
// ResourceVersion: everything up to it is in the page's snapshot, everything
// after it reaches a watcher that starts from it. Later pages read current
// data after the last id of the previous page.
func (s *Store) ListResources(ctx context.Context, req storage.ListResourcesRequest) (*storage.ListResourcesResult, error) {
	q, err := storage.ParseList(req)
	if err != nil {
		return nil, err
	}
	where, args := []string{"id > ?"}, []any{q.AfterID}
	if req.ResourceTypeName != "" {
		where, args = append(where, "resource_type_name = ?"), append(args, req.ResourceTypeName)
	}
	if req.ResourceTypeVersion != "" {
		where, args = append(where, "resource_type_version = ?"), append(args, req.ResourceTypeVersion)
	}
	if req.Namespace != "" {
		where, args = append(where, "namespace = ?"), append(args, req.Namespace)
	}
	if req.Status != "" {
		where, args = append(where, "status = ?"), append(args, req.Status)
	}
	terms, targs := selectorSQL(q.Selector)
	where, args = append(where, terms...), append(args, targs...)
	query := `SELECT ` + resourceColumns + ` FROM resources WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id LIMIT ?`
	args = append(args, q.Limit+1)

	out := &storage.ListResourcesResult{Resources: make([]*resource.Resource, 0, min(q.Limit, 128)), ResourceVersion: q.Revision}
	err = s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out.ResourceVersion, err = q.PageRevision(func(head *int64) error {
			return tx.QueryRowContext(ctx, `SELECT published_revision FROM relay_state WHERE id = 1`).Scan(head)
		})
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		err = q.Collect(out, rows.Next, func() ([]byte, int64, error) { return scanDocument(rows) },
			func() (*resource.Resource, error) { return scanResource(rows) })
		if err != nil {
			return err
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanDocument reads one row of resourceColumns straight into the
// resource's canonical JSON document (storage.DocumentFields), without
// decoding the JSON-valued columns.
func scanDocument(row scanner) ([]byte, int64, error) {
	var (
		d                   storage.DocumentFields
		created, updated    int64
		deleted, reconciled sql.NullInt64
	)
	if err := row.Scan(&d.ID, &d.UID, &d.Namespace, &d.Name, &d.TypeName, &d.TypeVersion, &d.Labels, &d.Annotations,
		&d.Owners, &d.Spec, &d.Status, &d.Message, &d.Generation, &d.Observed, &d.ResourceVersion,
		&d.Conditions, &d.Phase, &d.Outputs, &d.Finalizers, &created, &updated, &deleted, &reconciled); err != nil {
		return nil, 0, err
	}
	d.Created, d.Updated = timeOf(created), timeOf(updated)
	d.Deleted, d.Reconciled = timeOrNil(deleted), timeOrNil(reconciled)
	return d.AppendDocument(make([]byte, 0, d.Size())), d.ID, nil
}
