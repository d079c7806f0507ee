package pgstore

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/labelselector"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

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
	where := []string{"id > $1"}
	args := []any{q.AfterID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if req.ResourceTypeName != "" {
		where = append(where, "resource_type_name = "+arg(req.ResourceTypeName))
	}
	if req.ResourceTypeVersion != "" {
		where = append(where, "resource_type_version = "+arg(req.ResourceTypeVersion))
	}
	if req.Namespace != "" {
		where = append(where, "namespace = "+arg(req.Namespace))
	}
	if req.Status != "" {
		where = append(where, "status = "+arg(req.Status))
	}
	for _, r := range q.Selector {
		switch r.Operator {
		case labelselector.Equals:
			where = append(where, "labels @> "+arg(map[string]string{r.Key: r.Values[0]}))
		case labelselector.NotEquals:
			where = append(where, "NOT labels @> "+arg(map[string]string{r.Key: r.Values[0]}))
		case labelselector.In:
			where = append(where, "(labels ->> "+arg(r.Key)+") = ANY("+arg(r.Values)+")")
		case labelselector.NotIn:
			where = append(where, "NOT coalesce((labels ->> "+arg(r.Key)+") = ANY("+arg(r.Values)+"), false)")
		case labelselector.Exists:
			where = append(where, "labels ? "+arg(r.Key))
		case labelselector.DoesNotExist:
			where = append(where, "NOT labels ? "+arg(r.Key))
		}
	}
	query := `SELECT ` + resourceColumns + ` FROM resources WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY id LIMIT ` + arg(q.Limit+1)

	out := &storage.ListResourcesResult{Resources: make([]*resource.Resource, 0, min(q.Limit, 128)), ResourceVersion: q.Revision}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if q.First() {
			if err := tx.QueryRow(ctx, `SELECT published_revision FROM relay_state WHERE id = 1`).Scan(&out.ResourceVersion); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, query, args...)
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
		return nil, translate(err)
	}
	return out, nil
}
