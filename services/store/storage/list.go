package storage

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
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
	// Namespace restricts the list to one namespace ("": every namespace).
	Namespace     string
	Status        string
	LabelSelector string
	Limit         int
	Continue      string
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

// ListQuery is a validated list request, what a backend turns into its
// query: resources with an id above AfterID that match the filters, by
// ascending id, at most Limit of them.
type ListQuery struct {
	Request  ListResourcesRequest
	Limit    int
	Selector labelselector.Selector
	// AfterID is where the page starts (0: the first page).
	AfterID int64
	// Revision is the first page's ResourceVersion, carried by the continue
	// token (0 on the first page: the backend reads it with the page).
	Revision int64
}

// First reports whether this is the first page: its backend reads the
// relay's published revision in the page's snapshot.
func (q *ListQuery) First() bool { return q.Request.Continue == "" }

// PageRevision is the resource version a page answers with, given
// readHead, which reads the published revision now (in the page's
// transaction): that on the first page; on a later page its token's, which
// a token the store did not write can set ahead of it: that is refused as
// malformed rather than echoed.
func (q *ListQuery) PageRevision(readHead func(head *int64) error) (int64, error) {
	var head int64
	if err := readHead(&head); err != nil {
		return 0, err
	}
	if q.First() {
		return head, nil
	}
	if q.Revision > head {
		return 0, InvalidField("/continue", "malformed continue token")
	}
	return q.Revision, nil
}

// continueToken is the decoded form of a continue token.
type continueToken struct {
	AfterID  int64  `json:"a"`
	Revision int64  `json:"r"`
	Filter   string `json:"f"`
}

func (req ListResourcesRequest) fingerprint() string {
	filters := []string{req.ResourceTypeName, req.ResourceTypeVersion, req.Status, req.LabelSelector}
	// Only when set, so that the tokens of lists across every namespace
	// stay what they were before namespaces existed.
	if req.Namespace != "" {
		filters = append(filters, req.Namespace)
	}
	h := sha256.Sum256([]byte(strings.Join(filters, "\x00")))
	return base64.RawURLEncoding.EncodeToString(h[:8])
}

// ParseList validates a list request: its namespace, limit, status, label
// selector and continue token.
func ParseList(req ListResourcesRequest) (*ListQuery, error) {
	q := &ListQuery{Request: req, Limit: req.Limit}
	if req.Namespace != "" {
		if fe := names.Namespace("/namespace", req.Namespace); fe != nil {
			return nil, InvalidField(fe.Path, fe.Message)
		}
	}
	if q.Limit == 0 {
		q.Limit = DefaultListLimit
	}
	if q.Limit < 1 || q.Limit > MaxListLimit {
		return nil, InvalidField("/limit", fmt.Sprintf("must be between 1 and %d", MaxListLimit))
	}
	if req.Status != "" && !slices.Contains(resource.Statuses, req.Status) {
		return nil, InvalidField("/status", fmt.Sprintf("unknown status %q: one of %s", req.Status, strings.Join(resource.Statuses, ", ")))
	}
	sel, err := labelselector.Parse(req.LabelSelector)
	if err != nil {
		return nil, InvalidField("/label_selector", err.Error())
	}
	q.Selector = sel
	if req.Continue != "" {
		var tok continueToken
		raw, err := base64.RawURLEncoding.DecodeString(req.Continue)
		if err != nil || json.Unmarshal(raw, &tok) != nil || tok.AfterID < 0 || tok.Revision < 0 {
			return nil, InvalidField("/continue", "malformed continue token")
		}
		if tok.Filter != req.fingerprint() {
			return nil, InvalidField("/continue", "continue token belongs to a list with other filters")
		}
		q.AfterID, q.Revision = tok.AfterID, tok.Revision
	}
	return q, nil
}

// Collect reads a page's rows into out and finishes it (Finish): next
// advances to the next row (false after the last), doc scans the row as a
// document, res as a resource. A documents page stops at Limit rows; a
// resources page takes the Limit + 1 rows the query reads, and Finish trims
// it.
func (q *ListQuery) Collect(out *ListResourcesResult, next func() bool, doc func() ([]byte, int64, error), res func() (*resource.Resource, error)) error {
	var more bool
	var lastID int64
	for next() {
		if q.Request.Documents {
			if len(out.Documents) == q.Limit {
				more = true
				break
			}
			d, id, err := doc()
			if err != nil {
				return err
			}
			out.Documents, lastID = append(out.Documents, d), id
			continue
		}
		r, err := res()
		if err != nil {
			return err
		}
		out.Resources = append(out.Resources, r)
	}
	q.Finish(out, more, lastID)
	return nil
}

// Finish trims a page read with Limit + 1 rows to Limit and sets its
// continue token. lastDocID is the id of the last document kept when the
// backend read documents (it stops at Limit and sets moreDocs itself).
func (q *ListQuery) Finish(out *ListResourcesResult, moreDocs bool, lastDocID int64) {
	more, lastID := moreDocs, lastDocID
	if len(out.Resources) > q.Limit {
		out.Resources = out.Resources[:q.Limit]
		more, lastID = true, out.Resources[q.Limit-1].ID
	}
	if more {
		next := continueToken{AfterID: lastID, Revision: out.ResourceVersion, Filter: q.Request.fingerprint()}
		raw, _ := json.Marshal(next)
		out.Continue = base64.RawURLEncoding.EncodeToString(raw)
	}
}
