package litestore

import (
	"database/sql"
	"encoding/json"

	"github.com/no8s/no8s/services/internal/resource"
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

const resourceColumns = `id, uid, namespace, name, resource_type_name, resource_type_version, labels, annotations,
	owner_references, spec, status, status_message, generation, observed_generation, resource_version,
	conditions, phase, outputs, finalizers, created_at, updated_at, deleted_at, last_reconcile_time`

// resourceRow is a row of resourceColumns, followed by extra destinations.
func scanResource(row scanner, extra ...any) (*resource.Resource, error) {
	var (
		r                                        resource.Resource
		labels, annotations, owners, spec, conds string
		outputs, finalizers                      string
		created, updated                         int64
		deleted, reconciled                      sql.NullInt64
	)
	dest := []any{&r.ID, &r.UID, &r.Namespace, &r.Name, &r.ResourceTypeName, &r.ResourceTypeVersion, &labels, &annotations,
		&owners, &spec, &r.Status, &r.StatusMessage, &r.Generation, &r.ObservedGeneration, &r.ResourceVersion,
		&conds, &r.Phase, &outputs, &finalizers, &created, &updated, &deleted, &reconciled}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		text string
		v    any
	}{{labels, &r.Labels}, {annotations, &r.Annotations}, {owners, &r.OwnerReferences}, {conds, &r.Conditions}, {finalizers, &r.Finalizers}} {
		if err := decodeJSON(f.text, f.v); err != nil {
			return nil, err
		}
	}
	r.Spec, r.Outputs = json.RawMessage(spec), json.RawMessage(outputs)
	r.CreatedAt, r.UpdatedAt = timeOf(created), timeOf(updated)
	r.DeletedAt, r.LastReconcileTime = timeOrNil(deleted), timeOrNil(reconciled)
	r.Normalize()
	return &r, nil
}
