package pgstore

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/store/storage"
)

// scanDocument reads one row of resourceColumns straight into the resource's
// canonical JSON document (storage.DocumentFields), the same document
// resource.Marshal produces for the scanned resource, without decoding the
// JSON-valued columns.
func scanDocument(row pgx.Row) (doc []byte, id int64, err error) {
	var d storage.DocumentFields
	var uid uuid.UUID
	if err := row.Scan(&d.ID, &uid, &d.Namespace, &d.Name, &d.TypeName, &d.TypeVersion, &d.Labels, &d.Annotations,
		&d.Owners, &d.Spec, &d.Status, &d.Message, &d.Generation, &d.Observed, &d.ResourceVersion,
		&d.Conditions, &d.Phase, &d.Outputs, &d.Finalizers, &d.Created, &d.Updated, &d.Deleted, &d.Reconciled); err != nil {
		return nil, 0, err
	}
	d.UID = uid.String()
	return d.AppendDocument(make([]byte, 0, d.Size())), d.ID, nil
}
