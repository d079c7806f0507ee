package pgstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/no8s/no8s/services/internal/resource"

	"github.com/no8s/no8s/services/store/storage"
)

// documentColumns are what a page of documents reads of each row: its id
// and its stored document while that is the one of its current
// resource_version (migration 00015); NULL otherwise: a row no change has
// touched since the column existed, or one a store of the previous release
// changed during a rolling upgrade.
const documentColumns = `id, CASE WHEN document_version = resource_version THEN document END`

// scanStoredDocument reads one row of documentColumns: doc is nil for a row
// without a current stored document.
func scanStoredDocument(row pgx.Row) (doc []byte, id int64, err error) {
	err = row.Scan(&id, &doc)
	return doc, id, err
}

// renderDocuments renders, from their columns (scanDocument), the
// documents of the rows without a current stored one (documentColumns):
// unrendered maps each one's id to its place in docs, which it fills. It
// reads in tx, the page's snapshot.
func renderDocuments(ctx context.Context, tx pgx.Tx, docs [][]byte, unrendered map[int64]int) error {
	if len(unrendered) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(unrendered))
	for id := range unrendered {
		ids = append(ids, id)
	}
	rows, err := tx.Query(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		doc, id, err := scanDocument(rows)
		if err != nil {
			return err
		}
		docs[unrendered[id]] = doc
		delete(unrendered, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(unrendered) > 0 {
		// The page's snapshot held them a moment ago.
		return fmt.Errorf("%d resources of the page vanished from its snapshot", len(unrendered))
	}
	return nil
}

// scanDocument reads one row of resourceColumns straight into the resource's
// canonical JSON document (storage.DocumentFields), the same document
// resource.Marshal produces for the scanned resource, without decoding the
// JSON-valued columns. Those are read in place, in the connection's buffer
// (pgtype.DriverBytes), valid until the next row: the document copies them.
func scanDocument(row pgx.Row) (doc []byte, id int64, err error) {
	var d storage.DocumentFields
	var uid uuid.UUID
	if err := row.Scan(&d.ID, &uid, &d.Namespace, &d.Name, &d.TypeName, &d.TypeVersion, inPlace(&d.Labels), inPlace(&d.Annotations),
		inPlace(&d.Owners), inPlace(&d.Spec), &d.Status, &d.Message, &d.Generation, &d.Observed, &d.ResourceVersion,
		inPlace(&d.Conditions), &d.Phase, inPlace(&d.Outputs), inPlace(&d.Finalizers), &d.Created, &d.Updated, &d.Deleted, &d.Reconciled); err != nil {
		return nil, 0, err
	}
	d.UID = uid.String()
	return d.AppendDocument(make([]byte, 0, d.Size())), d.ID, nil
}

// inPlace scans a column's bytes without copying them out of the
// connection's buffer: they hold until the row's next Next.
func inPlace(b *[]byte) *pgtype.DriverBytes { return (*pgtype.DriverBytes)(b) }

// jsonMap is a string map as a jsonb parameter, rendered without
// reflection (pgx would call encoding/json).
func jsonMap(m map[string]string) []byte { return resource.AppendStringMap(nil, m) }

// jsonConditions is conditions as a jsonb parameter, rendered without
// reflection; those encoding/json would refuse go to it (and fail there).
func jsonConditions(c []resource.Condition) any {
	if b, ok := resource.AppendConditions(nil, c); ok {
		return b
	}
	return c
}
