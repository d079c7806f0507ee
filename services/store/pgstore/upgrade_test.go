package pgstore_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/no8s/no8s/migrations"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/pgoutbox"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
	"github.com/no8s/no8s/services/store/storage/storetest"
)

// previousReleaseVersion is the schema version of the release before
// namespaces (migrations 00001-00004).
const previousReleaseVersion = 4

// TestUpgradeToNamespaces builds a database with the previous release's
// migrations, fills it the way that release's store did (its SQL: creates,
// a reconcile's completion and history, a deletion waiting for a
// finalizer, a purged resource, a webhook, the outbox and the relay's
// cursor), migrates it in place to this release and checks it through the
// store (storetest.CheckUpgraded): every resource in default, still
// readable, writable and unique by name.
func TestUpgradeToNamespaces(t *testing.T) {
	ctx := t.Context()
	pool := databaseAt(t, previousReleaseVersion)
	if err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return writePreviousRelease(ctx, tx) }); err != nil {
		t.Fatalf("write as the previous release: %v", err)
	}

	v, err := migrate.Up(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("migrate in place: %v", err)
	}
	if v < 5 {
		t.Fatalf("migrated to version %d", v)
	}
	storetest.CheckUpgraded(t, storage.Backend{Store: pgstore.New(pool, storage.Options{}), Log: pgoutbox.New(pool), Name: "postgres", Close: func() {}})
}

// writePreviousRelease writes storetest's old state with the SQL of the
// previous release's pgstore (no namespace column).
func writePreviousRelease(ctx context.Context, tx pgx.Tx) error {
	rev := func() (int64, error) {
		var r int64
		err := tx.QueryRow(ctx, `SELECT nextval('revision_seq')`).Scan(&r)
		return r, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	typeRev, err := rev()
	if err != nil {
		return err
	}
	var typeID int64
	if err := tx.QueryRow(ctx, `INSERT INTO resource_types (name, version, description, schema, resource_version, created_at, updated_at)
		VALUES ('Widget', 'v1', '', $1, $2, $3, $3) RETURNING id`, storetest.OldSchema, typeRev, now).Scan(&typeID); err != nil {
		return err
	}
	outbox := func(event string, r *resource.Resource, rv int64) error {
		payload, err := storetest.OldEvent(event, r, rv, now)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO outbox (revision, resource_id, event_type, subject, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			rv, r.ID, event, envelope.Subject(r.ResourceTypeName, r.ResourceTypeVersion), payload, now)
		return err
	}
	create := func(old storetest.OldResource) (*resource.Resource, error) {
		r := &resource.Resource{UID: uuid.NewString(), Name: old.Name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
			Labels: old.Labels, Spec: json.RawMessage(old.Spec), Status: resource.StatusPending, Generation: 1,
			Phase: resource.PhaseProgressing, Finalizers: old.Finalizers, CreatedAt: now, UpdatedAt: now}
		r.Normalize()
		if err := tx.QueryRow(ctx, `SELECT nextval('resources_id_seq')`).Scan(&r.ID); err != nil {
			return nil, err
		}
		var err error
		if r.ResourceVersion, err = rev(); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO resources (id, uid, name, resource_type_id, resource_type_name, resource_type_version, labels, annotations,
			owner_references, spec, status, generation, resource_version, phase, finalizers, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
			r.ID, r.UID, r.Name, typeID, r.ResourceTypeName, r.ResourceTypeVersion, r.Labels, r.Annotations,
			r.OwnerReferences, []byte(r.Spec), r.Status, r.Generation, r.ResourceVersion, r.Phase, r.Finalizers, r.CreatedAt, r.UpdatedAt); err != nil {
			return nil, err
		}
		return r, outbox(envelope.Created, r, r.ResourceVersion)
	}
	for _, old := range storetest.OldResources {
		r, err := create(old)
		if err != nil {
			return err
		}
		if old.History > 0 {
			// Attempts, the last one a success: history rows, then the
			// completion's write and its RECONCILED event.
			for epoch := int64(1); epoch <= int64(old.History); epoch++ {
				if _, err := tx.Exec(ctx, `INSERT INTO reconciliation_history (resource_id, generation, success, phase, error_message, resources_created,
					resources_updated, resources_deleted, started_at, duration_ms, reconcile_time, lease_epoch, holder, reason)
					VALUES ($1, 1, true, 'completed', NULL, 0, 0, 0, $2, 5, $2, $3, 'noop/replica', 'pending')`, r.ID, now, epoch); err != nil {
					return err
				}
			}
			r.Status, r.Phase, r.ObservedGeneration, r.Conditions = old.Status, old.Phase, old.Observed, old.Conditions
			if r.ResourceVersion, err = rev(); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE resources SET status = $2, observed_generation = $3, conditions = $4, phase = $5, resource_version = $6,
				updated_at = $7, last_reconcile_time = $7, lease_holder = $8, lease_epoch = $9, lease_acquired_at = $7 WHERE id = $1`,
				r.ID, r.Status, r.ObservedGeneration, r.Conditions, r.Phase, r.ResourceVersion, now, old.LeaseHolder, old.LeaseEpoch); err != nil {
				return err
			}
			if err := outbox(envelope.Reconciled, r, r.ResourceVersion); err != nil {
				return err
			}
		}
		if old.Deleting {
			r.Status, r.Phase, r.DeletedAt = resource.StatusDeleting, resource.PhaseTerminating, &now
			if r.ResourceVersion, err = rev(); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE resources SET status = $2, phase = $3, deleted_at = $4, updated_at = $4, resource_version = $5,
				failures = 0, terminal_generation = 0 WHERE id = $1`, r.ID, r.Status, r.Phase, now, r.ResourceVersion); err != nil {
				return err
			}
			if err := outbox(envelope.Deleted, r, r.ResourceVersion); err != nil {
				return err
			}
		}
	}
	// A resource created and purged: its id is taken for ever.
	purged, err := create(storetest.OldResource{Name: storetest.OldPurgedName, Spec: `{}`})
	if err != nil {
		return err
	}
	purgeRev, err := rev()
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM resources WHERE id = $1`, purged.ID); err != nil {
		return err
	}
	if err := outbox(envelope.Purged, purged, purgeRev); err != nil {
		return err
	}
	w := storetest.OldWebhook()
	ops, err := json.Marshal(w.Operations)
	if err != nil {
		return err
	}
	hookRev, err := rev()
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO admission_webhooks (name, resource_type_name, resource_type_version,
		webhook_url, webhook_type, operations, timeout_seconds, failure_policy, ordering, ca_bundle, resource_version, created_at, updated_at)
		VALUES ($1, NULL, NULL, $2, $3, $4, $5, $6, 0, NULL, $7, $8, $8)`,
		w.Name, w.URL, w.Type, ops, w.TimeoutSeconds, w.FailurePolicy, hookRev, now); err != nil {
		return err
	}
	// The relay published everything.
	_, err = tx.Exec(ctx, `UPDATE relay_state SET published_revision = $1, last_event_revision = $1 WHERE id = 1`, purgeRev)
	return err
}

// databaseAt is a fresh test database migrated up to schema version
// version only, as a previous release left it.
func databaseAt(t *testing.T, version int64) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), version); err != nil {
		t.Fatal(err)
	}
	return pool
}
