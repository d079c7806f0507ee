package pgstore

import (
	"context"
	"slices"
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
//
// A label selector with an equality (key=value) can be served two ways: by
// walking the resources in id order and filtering (fast when many match),
// or by the labels' GIN index, then sorting the matches by id (fast when
// few do). Which is faster depends on how many match, and the planner's
// guess at that depends on its statistics of the labels, which a growing
// table rarely has right (docs/design/performance.md: 44 ms instead of 2 at
// a million resources). So the store decides from the data instead, with
// each plan fixed by the planner settings of its statement:
//
//  1. walk: the matches among the next listProbe resources in id order
//     (bitmap and sequential scans off, so it is an index walk whatever
//     the statistics);
//     a full page ends here, and so does a list with no more resources;
//  2. index: otherwise the matches are rarer than one in listProbe/limit,
//     and the rest of the page comes from the GIN index (sequential and
//     index scans off, and no other condition indexable: a bitmap scan of
//     the labels' index), sorted by id.
func (s *Store) ListResources(ctx context.Context, req storage.ListResourcesRequest) (*storage.ListResourcesResult, error) {
	q, err := storage.ParseList(req)
	if err != nil {
		return nil, err
	}
	indexed := slices.ContainsFunc(q.Selector, func(r labelselector.Requirement) bool { return r.Operator == labelselector.Equals })
	probe := max(s.listProbe(), listProbePerItem*q.Limit)
	// walk is the page by id order: with an indexed selector, within the
	// probe's window.
	walk := newListSQL(q.AfterID)
	where := walk.conds(req, q.Selector)
	if indexed {
		where += " AND id <= (SELECT max(id) FROM (SELECT id FROM resources WHERE " + walk.conds(req, nil) +
			" ORDER BY id LIMIT " + walk.arg(probe) + ") w)"
	}
	// A page of documents reads each row's stored document (documentColumns).
	columns := resourceColumns
	if req.Documents {
		columns = documentColumns
	}
	walkSQL := `SELECT ` + columns + ` FROM resources WHERE ` + where + ` ORDER BY id LIMIT ` + walk.arg(q.Limit+1)

	out := &storage.ListResourcesResult{Resources: make([]*resource.Resource, 0, min(q.Limit, 128)), ResourceVersion: q.Revision}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		out.ResourceVersion, err = q.PageRevision(func(head *int64) error {
			return tx.QueryRow(ctx, `SELECT published_revision FROM relay_state WHERE id = 1`).Scan(head)
		})
		if err != nil {
			return err
		}
		if indexed {
			if _, err := tx.Exec(ctx, `SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, walkSQL, walk.args...)
		if err != nil {
			return err
		}
		defer func() { rows.Close() }()
		got, switched := 0, false
		var qerr error
		next := func() bool {
			for {
				if rows.Next() {
					got++
					return true
				}
				if qerr = rows.Err(); qerr != nil || !indexed || switched || got > q.Limit {
					return false
				}
				switched = true
				rows.Close()
				// The walk ended short of a page: did its window hold
				// every resource left, or only the probe's?
				window := newListSQL(q.AfterID)
				var seen, last int64
				if qerr = tx.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM (SELECT id FROM resources WHERE `+window.conds(req, nil)+
					` ORDER BY id LIMIT `+window.arg(probe)+`) w`, window.args...).Scan(&seen, &last); qerr != nil || seen < int64(probe) {
					return false
				}
				// Matches are rarer than one in listProbePerItem: the rest
				// of the page from the labels' index.
				if _, qerr = tx.Exec(ctx, `SELECT set_config('enable_bitmapscan', 'on', true), set_config('enable_indexscan', 'off', true)`); qerr != nil {
					return false
				}
				rest := newListSQL(last)
				restSQL := `SELECT ` + columns + ` FROM resources WHERE ` + rest.labelsOnly(req, q.Selector) + ` ORDER BY id LIMIT ` + rest.arg(q.Limit+1-got)
				if rows, qerr = tx.Query(ctx, restSQL, rest.args...); qerr != nil {
					return false
				}
			}
		}
		var unrendered map[int64]int // rows without a current stored document: id → place
		err = q.Collect(out, next, func() ([]byte, int64, error) {
			doc, id, err := scanStoredDocument(rows)
			if err == nil && doc == nil {
				if unrendered == nil {
					unrendered = map[int64]int{}
				}
				unrendered[id] = len(out.Documents)
			}
			return doc, id, err
		}, func() (*resource.Resource, error) { return scanResource(rows) })
		if err != nil {
			return err
		}
		if qerr != nil {
			return qerr
		}
		rows.Close()
		return renderDocuments(ctx, tx, out.Documents, unrendered)
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// listSQL holds the arguments of a list statement; $1 is the id its page
// starts after.
type listSQL struct{ args []any }

func newListSQL(after int64) *listSQL { return &listSQL{args: []any{after}} }

// arg adds an argument and returns its placeholder.
func (l *listSQL) arg(v any) string {
	l.args = append(l.args, v)
	return "$" + strconv.Itoa(len(l.args))
}

// conds returns "id > $1 AND ..." with the request's conditions: type,
// version, namespace, status, and the requirements of sel.
func (l *listSQL) conds(req storage.ListResourcesRequest, sel labelselector.Selector) string {
	return l.where(req, sel, false)
}

// labelsOnly is conds with only the labels' conditions left for an index:
// the others are written as expressions (id + 0, column || ”), which no
// index of the table serves, so that a bitmap scan can only be the labels'
// GIN index, whatever the planner believes of the other columns.
func (l *listSQL) labelsOnly(req storage.ListResourcesRequest, sel labelselector.Selector) string {
	return l.where(req, sel, true)
}

func (l *listSQL) where(req storage.ListResourcesRequest, sel labelselector.Selector, labelsOnly bool) string {
	col, id := func(c string) string { return c }, "id"
	if labelsOnly {
		col, id = func(c string) string { return "(" + c + " || '')" }, "(id + 0)"
	}
	where := []string{id + " > $1"}
	if req.ResourceTypeName != "" {
		where = append(where, col("resource_type_name")+" = "+l.arg(req.ResourceTypeName))
	}
	if req.ResourceTypeVersion != "" {
		where = append(where, col("resource_type_version")+" = "+l.arg(req.ResourceTypeVersion))
	}
	if req.Namespace != "" {
		where = append(where, col("namespace")+" = "+l.arg(req.Namespace))
	}
	if req.Status != "" {
		where = append(where, col("status")+" = "+l.arg(req.Status))
	}
	for _, r := range sel {
		switch r.Operator {
		case labelselector.Equals:
			where = append(where, "labels @> "+l.arg(jsonMap(map[string]string{r.Key: r.Values[0]})))
		case labelselector.NotEquals:
			where = append(where, "NOT labels @> "+l.arg(jsonMap(map[string]string{r.Key: r.Values[0]})))
		case labelselector.In:
			where = append(where, "(labels ->> "+l.arg(r.Key)+") = ANY("+l.arg(r.Values)+")")
		case labelselector.NotIn:
			where = append(where, "NOT coalesce((labels ->> "+l.arg(r.Key)+") = ANY("+l.arg(r.Values)+"), false)")
		case labelselector.Exists:
			where = append(where, "labels ? "+l.arg(r.Key))
		case labelselector.DoesNotExist:
			where = append(where, "NOT labels ? "+l.arg(r.Key))
		}
	}
	return strings.Join(where, " AND ")
}

// The walk's window (ListResources): at least listProbe resources, and
// listProbePerItem per item asked. A selector whose matches are rarer than
// one in listProbePerItem goes to the labels' index.
const (
	listProbe        = 2000
	listProbePerItem = 20
)

// listProbe is the walk's smallest window: listProbe unless a test set
// another.
func (s *Store) listProbe() int {
	if s.probe > 0 {
		return s.probe
	}
	return listProbe
}
