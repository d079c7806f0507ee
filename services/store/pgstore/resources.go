package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

const resourceColumns = `id, uid, name, resource_type_name, resource_type_version, labels, annotations,
	owner_references, spec, status, status_message, generation, observed_generation, resource_version,
	conditions, phase, outputs, finalizers, created_at, updated_at, deleted_at, last_reconcile_time`

func scanResource(row pgx.Row) (*resource.Resource, error) {
	var r resource.Resource
	var uid uuid.UUID
	var spec, outputs []byte
	if err := row.Scan(&r.ID, &uid, &r.Name, &r.ResourceTypeName, &r.ResourceTypeVersion, &r.Labels, &r.Annotations,
		&r.OwnerReferences, &spec, &r.Status, &r.StatusMessage, &r.Generation, &r.ObservedGeneration, &r.ResourceVersion,
		&r.Conditions, &r.Phase, &outputs, &r.Finalizers, &r.CreatedAt, &r.UpdatedAt, &r.DeletedAt, &r.LastReconcileTime); err != nil {
		return nil, err
	}
	r.UID = uid.String()
	r.Spec = compactJSON(spec)
	r.Outputs = compactJSON(outputs)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if r.DeletedAt != nil {
		t := r.DeletedAt.UTC()
		r.DeletedAt = &t
	}
	if r.LastReconcileTime != nil {
		t := r.LastReconcileTime.UTC()
		r.LastReconcileTime = &t
	}
	r.Normalize()
	return &r, nil
}

// compactJSON removes the spaces that jsonb's text form adds.
func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return json.RawMessage(b)
	}
	return buf.Bytes()
}

// CreateResourceRequest creates a resource. Spec must have been admitted
// against the type revision SchemaRevision (0 skips that check).
type CreateResourceRequest struct {
	Resource       resource.Resource
	SchemaRevision int64
	DryRun         bool
}

func validateSpec(spec []byte) ([]byte, error) {
	if len(spec) > names.MaxSpecBytes+names.MaxSpecBytes/2 {
		return nil, tooLargeSpec(len(spec))
	}
	c, perr := resource.CompactObject("/spec", spec)
	if perr != nil {
		return nil, invalidOf(perr.Code, perr.Detail, perr.Fields)
	}
	if perr := strictjson.Check(c, "/spec"); perr != nil {
		return nil, invalidOf(perr.Code, perr.Detail, perr.Fields)
	}
	if len(c) > names.MaxSpecBytes {
		return nil, tooLargeSpec(len(c))
	}
	return c, nil
}

func tooLargeSpec(n int) error {
	return newError(ErrTooLarge, "spec is %d bytes, more than the %d allowed", n, names.MaxSpecBytes).
		withFields(FieldError{Path: "/spec", Message: fmt.Sprintf("larger than %d bytes", names.MaxSpecBytes)})
}

func validateFinalizers(fs []string) []FieldError {
	var errs []FieldError
	for i, f := range fs {
		if fe := names.Finalizer(fmt.Sprintf("/finalizers/%d", i), f); fe != nil {
			errs = append(errs, fieldOf(fe)...)
		}
	}
	if len(fs) > names.MaxFinalizers {
		errs = append(errs, FieldError{Path: "/finalizers", Message: fmt.Sprintf("more than %d finalizers", names.MaxFinalizers)})
	}
	return errs
}

// CreateResource stores a new resource and its CREATED event.
func (s *Store) CreateResource(ctx context.Context, req CreateResourceRequest) (*resource.Resource, error) {
	in := req.Resource
	var errs []FieldError
	if fe := names.Name("/name", in.Name); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	errs = append(errs, fieldsOf(resource.ValidateMetadata(in.Labels, in.Annotations, in.OwnerReferences))...)
	fins := dedupe(in.Finalizers)
	errs = append(errs, validateFinalizers(fins)...)
	if len(errs) > 0 {
		return nil, newError(ErrInvalid, "invalid resource").withFields(errs...)
	}
	spec, err := validateSpec(in.Spec)
	if err != nil {
		return nil, err
	}
	r := &resource.Resource{
		UID:                 uuid.NewString(),
		Name:                in.Name,
		ResourceTypeName:    in.ResourceTypeName,
		ResourceTypeVersion: in.ResourceTypeVersion,
		Labels:              in.Labels,
		Annotations:         in.Annotations,
		OwnerReferences:     in.OwnerReferences,
		Spec:                spec,
		Status:              resource.StatusPending,
		Generation:          1,
		Finalizers:          fins,
	}
	r.Phase = resource.PhaseFor(r.Status, false, nil)
	r.Normalize()
	var typeID, typeRev int64
	var rv *revisions
	err = s.pipelinedWrite(ctx, req.DryRun, func(b *pgx.Batch) {
		b.Queue(typeLockSQL, r.ResourceTypeName, r.ResourceTypeVersion)
		b.Queue(`SELECT id, resource_version FROM resource_types WHERE name = $1 AND version = $2`, r.ResourceTypeName, r.ResourceTypeVersion)
		queueRevisions(b, 1)
		b.Queue(`SELECT nextval('resources_id_seq')`)
	}, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		err := br.QueryRow().Scan(&typeID, &typeRev)
		if errors.Is(err, pgx.ErrNoRows) {
			return unknownType(r.ResourceTypeName, r.ResourceTypeVersion)
		}
		if err != nil {
			return err
		}
		if rv, err = scanRevisions(br, 1); err != nil {
			return err
		}
		return br.QueryRow().Scan(&r.ID)
	}, func(b *pgx.Batch) error {
		if req.SchemaRevision != 0 && req.SchemaRevision != typeRev {
			return newError(ErrSchemaChanged, "the schema of %s/%s changed during admission; retry", r.ResourceTypeName, r.ResourceTypeVersion)
		}
		r.CreatedAt = rv.now
		return rv.emit(b, change{event: envelope.Created, r: r, write: func(b *pgx.Batch) {
			b.Queue(`INSERT INTO resources (id, uid, name, resource_type_id, resource_type_name, resource_type_version, labels, annotations,
				owner_references, spec, status, generation, resource_version, phase, finalizers, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
				r.ID, r.UID, r.Name, typeID, r.ResourceTypeName, r.ResourceTypeVersion, r.Labels, r.Annotations,
				r.OwnerReferences, []byte(r.Spec), r.Status, r.Generation, r.ResourceVersion, r.Phase, r.Finalizers, r.CreatedAt, r.UpdatedAt)
		}})
	})
	if err != nil {
		if errors.Is(err, ErrNameTaken) {
			return nil, newError(ErrNameTaken, "%s/%s %q already exists", r.ResourceTypeName, r.ResourceTypeVersion, r.Name).
				withFields(FieldError{Path: "/name", Message: "name already taken"})
		}
		return nil, err
	}
	if req.DryRun {
		r.ID, r.ResourceVersion = 0, 0
	}
	return r, nil
}

func unknownType(name, version string) error {
	return newError(ErrUnknownType, "resource type %s/%s does not exist", name, version).
		withFields(FieldError{Path: "/resource_type_name", Message: fmt.Sprintf("no resource type %s/%s", name, version)})
}

// ResourceKey names a resource by id, or by type, version and name.
type ResourceKey struct {
	ID                  int64
	ResourceTypeName    string
	ResourceTypeVersion string
	Name                string
}

func (k ResourceKey) String() string {
	if k.ID != 0 {
		return fmt.Sprintf("resource %d", k.ID)
	}
	return fmt.Sprintf("%s/%s %q", k.ResourceTypeName, k.ResourceTypeVersion, k.Name)
}

// GetResource returns a resource.
func (s *Store) GetResource(ctx context.Context, key ResourceKey) (*resource.Resource, error) {
	var row pgx.Row
	if key.ID != 0 {
		row = s.pool.QueryRow(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = $1`, key.ID)
	} else {
		row = s.pool.QueryRow(ctx, `SELECT `+resourceColumns+` FROM resources WHERE resource_type_name = $1 AND resource_type_version = $2 AND name = $3`,
			key.ResourceTypeName, key.ResourceTypeVersion, key.Name)
	}
	r, err := scanResource(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("%s not found", key)
	}
	return r, translate(err)
}

// lockResource reads a resource for update and checks the precondition.
func lockResource(ctx context.Context, tx pgx.Tx, id, expected int64) (*resource.Resource, error) {
	r, err := scanResource(tx.QueryRow(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("resource %d not found", id)
	}
	if err != nil {
		return nil, err
	}
	if expected != 0 && expected != r.ResourceVersion {
		return nil, newError(ErrConflict,
			"resource %d has resource_version %d, not %d: it changed since you read it; read it again and retry", id, r.ResourceVersion, expected)
	}
	return r, nil
}

// UpdateResourceRequest changes a resource's spec, labels or annotations.
// Nil fields are left as they are.
type UpdateResourceRequest struct {
	ID                      int64
	Spec                    []byte
	Labels                  map[string]string
	Annotations             map[string]string
	SetLabels               bool
	SetAnnotations          bool
	ExpectedResourceVersion int64
	SchemaRevision          int64
	DryRun                  bool
}

// UpdateResource applies an update, bumping generation when the spec changes.
// An update that changes nothing writes nothing and returns the resource.
func (s *Store) UpdateResource(ctx context.Context, req UpdateResourceRequest) (*resource.Resource, error) {
	var spec []byte
	if req.Spec != nil {
		var err error
		if spec, err = validateSpec(req.Spec); err != nil {
			return nil, err
		}
	}
	var r *resource.Resource
	err := s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
		var err error
		if r, err = lockResource(ctx, tx, req.ID, req.ExpectedResourceVersion); err != nil {
			return err
		}
		changed := false
		specChanged := spec != nil && !strictjson.Equal(spec, r.Spec)
		if specChanged {
			if r.DeletedAt != nil {
				return newError(ErrDeleting, "resource %d is being deleted; its spec can no longer change", r.ID)
			}
			var typeRev int64
			// No lock: a type cannot be deleted while this resource exists,
			// and a schema change committing meanwhile orders after us.
			err := tx.QueryRow(ctx, `SELECT resource_version FROM resource_types WHERE name = $1 AND version = $2`,
				r.ResourceTypeName, r.ResourceTypeVersion).Scan(&typeRev)
			if err != nil {
				return err
			}
			if req.SchemaRevision != 0 && req.SchemaRevision != typeRev {
				return newError(ErrSchemaChanged, "the schema of %s/%s changed during admission; retry", r.ResourceTypeName, r.ResourceTypeVersion)
			}
			r.Spec = spec
			r.Generation++
			changed = true
		}
		labels, annotations := r.Labels, r.Annotations
		if req.SetLabels {
			labels = orEmpty(req.Labels)
		}
		if req.SetAnnotations {
			annotations = orEmpty(req.Annotations)
		}
		if !maps.Equal(labels, r.Labels) || !maps.Equal(annotations, r.Annotations) {
			if errs := resource.ValidateMetadata(labels, annotations, r.OwnerReferences); len(errs) > 0 {
				return newError(ErrInvalid, "invalid resource").withFields(fieldsOf(errs)...)
			}
			r.Labels, r.Annotations = labels, annotations
			changed = true
		}
		if !changed {
			return nil
		}
		return emitTx(ctx, tx, change{event: envelope.Modified, r: r, write: func(b *pgx.Batch) {
			// A spec change resets the reconcile backoff (docs/design/reconcile.md).
			b.Queue(`UPDATE resources SET spec = $2, labels = $3, annotations = $4, generation = $5, resource_version = $6, updated_at = $7,
				failures = CASE WHEN $8 THEN 0 ELSE failures END WHERE id = $1`,
				r.ID, []byte(r.Spec), r.Labels, r.Annotations, r.Generation, r.ResourceVersion, r.UpdatedAt, specChanged)
		}})
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// DeleteResult is the state after a delete or finalizer change.
type DeleteResult struct {
	Resource *resource.Resource
	// Purged is true when the row is gone.
	Purged bool
}

// DeleteResource requests deletion: the resource becomes deleting (DELETED
// event) and, when it has no finalizers, is removed at once (PURGED event).
// Deleting a resource that is already deleting changes nothing.
func (s *Store) DeleteResource(ctx context.Context, id, expected int64, dryRun bool) (*DeleteResult, error) {
	var res DeleteResult
	err := s.write(ctx, dryRun, func(tx pgx.Tx) error {
		r, err := lockResource(ctx, tx, id, expected)
		if err != nil {
			return err
		}
		res.Resource = r
		if r.DeletedAt != nil {
			return nil
		}
		n := 1
		if len(r.Finalizers) == 0 {
			n = 2
		}
		rv, err := takeRevisions(ctx, tx, n)
		if err != nil {
			return err
		}
		now := rv.now
		r.Status, r.DeletedAt = resource.StatusDeleting, &now
		r.Phase = resource.PhaseFor(r.Status, r.Phase == resource.PhaseDegraded, r.Conditions)
		b := &pgx.Batch{}
		if n == 2 {
			// DELETED, then PURGED: the row goes at once.
			if err := rv.emit(b, change{event: envelope.Deleted, r: r, unbounded: true}); err != nil {
				return err
			}
			purged := *r
			err := rv.emit(b, change{event: envelope.Purged, r: &purged, unbounded: true, write: func(b *pgx.Batch) {
				b.Queue(`DELETE FROM resources WHERE id = $1 AND finalizers = '[]'::jsonb`, r.ID)
			}})
			if err != nil {
				return err
			}
			res.Resource, res.Purged = &purged, true
		} else {
			err := rv.emit(b, change{event: envelope.Deleted, r: r, unbounded: true, write: func(b *pgx.Batch) {
				// Deletion is dispatched at once: earlier failures' backoff is reset.
				b.Queue(`UPDATE resources SET status = $2, phase = $3, deleted_at = $4, updated_at = $4, resource_version = $5,
					failures = 0, terminal_generation = 0 WHERE id = $1`,
					r.ID, r.Status, r.Phase, now, r.ResourceVersion)
			}})
			if err != nil {
				return err
			}
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// UpdateFinalizersRequest adds and removes finalizers.
type UpdateFinalizersRequest struct {
	ID                      int64
	Add, Remove             []string
	ExpectedResourceVersion int64
	DryRun                  bool
}

// UpdateFinalizers adds and removes finalizers. While a resource is deleting,
// finalizers may be removed but not added; removing the last one purges it.
func (s *Store) UpdateFinalizers(ctx context.Context, req UpdateFinalizersRequest) (*DeleteResult, error) {
	var errs []FieldError
	for i, f := range req.Add {
		if fe := names.Finalizer(fmt.Sprintf("/add/%d", i), f); fe != nil {
			errs = append(errs, fieldOf(fe)...)
		}
	}
	if len(errs) > 0 {
		return nil, newError(ErrInvalid, "invalid finalizers").withFields(errs...)
	}
	var res DeleteResult
	err := s.write(ctx, req.DryRun, func(tx pgx.Tx) error {
		r, err := lockResource(ctx, tx, req.ID, req.ExpectedResourceVersion)
		if err != nil {
			return err
		}
		res.Resource = r
		next := make([]string, 0, len(r.Finalizers)+len(req.Add))
		for _, f := range r.Finalizers {
			if !slices.Contains(req.Remove, f) {
				next = append(next, f)
			}
		}
		for _, f := range dedupe(req.Add) {
			if slices.Contains(next, f) {
				continue
			}
			if r.DeletedAt != nil {
				return newError(ErrFinalizerBlocked, "resource %d is being deleted; finalizer %q cannot be added", r.ID, f).
					withFields(FieldError{Path: "/add", Message: "finalizers cannot be added while the resource is deleting"})
			}
			next = append(next, f)
		}
		if len(next) > names.MaxFinalizers {
			return newError(ErrInvalid, "more than %d finalizers", names.MaxFinalizers).
				withFields(FieldError{Path: "/add", Message: fmt.Sprintf("at most %d finalizers", names.MaxFinalizers)})
		}
		if slices.Equal(next, r.Finalizers) {
			return nil
		}
		r.Finalizers = next
		if r.DeletedAt != nil && len(next) == 0 {
			res.Purged = true
			return emitTx(ctx, tx, change{event: envelope.Purged, r: r, write: func(b *pgx.Batch) {
				b.Queue(`DELETE FROM resources WHERE id = $1`, r.ID)
			}})
		}
		return emitTx(ctx, tx, change{event: envelope.Modified, r: r, write: func(b *pgx.Batch) {
			b.Queue(`UPDATE resources SET finalizers = $2, resource_version = $3, updated_at = $4 WHERE id = $1`, r.ID, r.Finalizers, r.ResourceVersion, r.UpdatedAt)
		}})
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

func dedupe(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
