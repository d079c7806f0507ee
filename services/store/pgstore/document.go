package pgstore

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/no8s/no8s/services/internal/resource"

	"github.com/no8s/no8s/services/store/storage"
)

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
