package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/labelselector"
	"github.com/no8s/no8s/services/internal/resource"
)

// List page sizes.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListResourcesRequest filters and pages a resource list.
type ListResourcesRequest struct {
	ResourceTypeName    string
	ResourceTypeVersion string
	Status              string
	LabelSelector       string
	Limit               int
	Continue            string
	// Documents asks for canonical JSON documents instead of resources.
	Documents bool
}

// ListResourcesResult is one page.
type ListResourcesResult struct {
	Resources []*resource.Resource
	// Documents holds the canonical JSON documents when asked for.
	Documents [][]byte
	// Continue is empty on the last page.
	Continue string
	// ResourceVersion is the revision the first page was read at: every
	// change with a higher revision reaches a watch started from it.
	ResourceVersion int64
}

// continueToken is the decoded form of a continue token.
type continueToken struct {
	AfterID  int64  `json:"a"`
	Revision int64  `json:"r"`
	Filter   string `json:"f"`
}

func (req ListResourcesRequest) fingerprint() string {
	h := sha256.Sum256([]byte(strings.Join([]string{req.ResourceTypeName, req.ResourceTypeVersion, req.Status, req.LabelSelector}, "\x00")))
	return base64.RawURLEncoding.EncodeToString(h[:8])
}

// ListResources lists resources by ascending id. The first page is read in
// one snapshot together with the relay's published revision, which becomes
// ResourceVersion: everything up to it is in the page's snapshot, everything
// after it reaches a watcher that starts from it. Later pages read current
// data after the last id of the previous page.
func (s *Store) ListResources(ctx context.Context, req ListResourcesRequest) (*ListResourcesResult, error) {
	limit := req.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, invalidField("/limit", fmt.Sprintf("must be between 1 and %d", MaxListLimit))
	}
	if req.Status != "" && !slices.Contains(resource.Statuses, req.Status) {
		return nil, invalidField("/status", fmt.Sprintf("unknown status %q: one of %s", req.Status, strings.Join(resource.Statuses, ", ")))
	}
	sel, err := labelselector.Parse(req.LabelSelector)
	if err != nil {
		return nil, invalidField("/label_selector", err.Error())
	}
	var tok continueToken
	if req.Continue != "" {
		raw, err := base64.RawURLEncoding.DecodeString(req.Continue)
		if err != nil || json.Unmarshal(raw, &tok) != nil || tok.AfterID < 0 {
			return nil, invalidField("/continue", "malformed continue token")
		}
		if tok.Filter != req.fingerprint() {
			return nil, invalidField("/continue", "continue token belongs to a list with other filters")
		}
	}

	where := []string{"id > $1"}
	args := []any{tok.AfterID}
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
	if req.Status != "" {
		where = append(where, "status = "+arg(req.Status))
	}
	for _, r := range sel {
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
		` ORDER BY id LIMIT ` + arg(limit+1)

	var more bool
	var lastID int64
	out := &ListResourcesResult{Resources: make([]*resource.Resource, 0, min(limit, 128)), ResourceVersion: tok.Revision}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if req.Continue == "" {
			if err := tx.QueryRow(ctx, `SELECT published_revision FROM relay_state WHERE id = 1`).Scan(&out.ResourceVersion); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if req.Documents {
				if len(out.Documents) == limit {
					more = true
					break
				}
				doc, id, err := scanDocument(rows)
				if err != nil {
					return err
				}
				out.Documents = append(out.Documents, doc)
				lastID = id
				continue
			}
			r, err := scanResource(rows)
			if err != nil {
				return err
			}
			out.Resources = append(out.Resources, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, translate(err)
	}
	if len(out.Resources) > limit {
		out.Resources = out.Resources[:limit]
		more, lastID = true, out.Resources[limit-1].ID
	}
	if more {
		next := continueToken{AfterID: lastID, Revision: out.ResourceVersion, Filter: req.fingerprint()}
		raw, _ := json.Marshal(next)
		out.Continue = base64.RawURLEncoding.EncodeToString(raw)
	}
	return out, nil
}
