package litestore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pressly/goose/v3"

	"github.com/no8s/no8s/migrations"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/litestore"
	"github.com/no8s/no8s/services/store/storage"
	"github.com/no8s/no8s/services/store/storage/storetest"
)

// TestUpgradeToNamespaces builds an embedded store's file with the previous
// release's migration (00001), fills it the way that release's litestore
// did (its SQL: creates, a reconcile's completion and history, a deletion
// waiting for a finalizer, a purged resource, a webhook, the outbox and the
// relay's cursor), opens it with this release (which migrates it in place:
// the resources table is rebuilt) and checks it through the store
// (storetest.CheckUpgraded): every resource in default, history kept, ids
// never reused, still readable, writable and unique by name.
func TestUpgradeToNamespaces(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := writePreviousRelease(ctx, tx); err != nil {
		t.Fatalf("write as the previous release: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := litestore.Open(ctx, path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	v, err := s.Migrate(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("migrate in place: %v", err)
	}
	if v < 2 {
		t.Fatalf("migrated to version %d", v)
	}
	storetest.CheckUpgraded(t, storage.Backend{Store: s, Log: s.EventLog(), Name: "sqlite", Close: func() { _ = s.Close() }})
}

// writePreviousRelease writes storetest's old state with the SQL of the
// previous release's litestore (no namespace column).
func writePreviousRelease(ctx context.Context, tx *sql.Tx) error {
	rev := func() (int64, error) {
		var r int64
		err := tx.QueryRowContext(ctx, `UPDATE revision_counter SET value = value + 1 WHERE id = 1 RETURNING value`).Scan(&r)
		return r, err
	}
	text := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	us := now.UnixMicro()
	typeRev, err := rev()
	if err != nil {
		return err
	}
	var typeID int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO resource_types (name, version, description, schema, resource_version, created_at, updated_at, reconcile_policy)
		VALUES ('Widget', 'v1', '', ?, ?, ?, ?, NULL) RETURNING id`, storetest.OldSchema, typeRev, us, us).Scan(&typeID); err != nil {
		return err
	}
	outbox := func(event string, r *resource.Resource, rv int64) error {
		payload, err := storetest.OldEvent(event, r, rv, now)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO outbox (revision, resource_id, event_type, subject, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			rv, r.ID, event, envelope.Subject(r.ResourceTypeName, r.ResourceTypeVersion), payload, us)
		return err
	}
	create := func(old storetest.OldResource) (*resource.Resource, error) {
		r := &resource.Resource{UID: uuid.NewString(), Name: old.Name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
			Labels: old.Labels, Spec: json.RawMessage(old.Spec), Status: resource.StatusPending, Generation: 1,
			Phase: resource.PhaseProgressing, Finalizers: old.Finalizers, CreatedAt: now, UpdatedAt: now}
		r.Normalize()
		if err := tx.QueryRowContext(ctx, `SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'resources'), 0),
			coalesce((SELECT max(id) FROM resources), 0)) + 1`).Scan(&r.ID); err != nil {
			return nil, err
		}
		var err error
		if r.ResourceVersion, err = rev(); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO resources (id, uid, name, resource_type_id, resource_type_name, resource_type_version, labels,
			annotations, owner_references, spec, status, generation, resource_version, phase, finalizers, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.UID, r.Name, typeID, r.ResourceTypeName, r.ResourceTypeVersion, text(r.Labels), text(r.Annotations), text(r.OwnerReferences),
			string(r.Spec), r.Status, r.Generation, r.ResourceVersion, r.Phase, text(r.Finalizers), us, us); err != nil {
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
			for epoch := int64(1); epoch <= int64(old.History); epoch++ {
				if _, err := tx.ExecContext(ctx, `INSERT INTO reconciliation_history (resource_id, generation, success, phase, error_message, resources_created,
					resources_updated, resources_deleted, started_at, duration_ms, reconcile_time, lease_epoch, holder, reason)
					VALUES (?, 1, 1, 'completed', NULL, 0, 0, 0, ?, 5, ?, ?, 'noop/replica', 'pending')`, r.ID, us, us, epoch); err != nil {
					return err
				}
			}
			r.Status, r.Phase, r.ObservedGeneration, r.Conditions = old.Status, old.Phase, old.Observed, old.Conditions
			if r.ResourceVersion, err = rev(); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE resources SET status = ?, observed_generation = ?, conditions = ?, phase = ?, resource_version = ?,
				updated_at = ?, last_reconcile_time = ?, lease_holder = ?, lease_epoch = ?, lease_acquired_at = ? WHERE id = ?`,
				r.Status, r.ObservedGeneration, text(r.Conditions), r.Phase, r.ResourceVersion, us, us, old.LeaseHolder, old.LeaseEpoch, us, r.ID); err != nil {
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
			if _, err := tx.ExecContext(ctx, `UPDATE resources SET status = ?, phase = ?, deleted_at = ?, updated_at = ?, resource_version = ?,
				failures = 0, terminal_generation = 0 WHERE id = ?`, r.Status, r.Phase, us, us, r.ResourceVersion, r.ID); err != nil {
				return err
			}
			if err := outbox(envelope.Deleted, r, r.ResourceVersion); err != nil {
				return err
			}
		}
	}
	// A resource created and purged: its id is taken for ever
	// (AUTOINCREMENT's high-water mark).
	purged, err := create(storetest.OldResource{Name: storetest.OldPurgedName, Spec: `{}`})
	if err != nil {
		return err
	}
	purgeRev, err := rev()
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM resources WHERE id = ?`, purged.ID); err != nil {
		return err
	}
	if err := outbox(envelope.Purged, purged, purgeRev); err != nil {
		return err
	}
	w := storetest.OldWebhook()
	hookRev, err := rev()
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO admission_webhooks (name, resource_type_name, resource_type_version,
		webhook_url, webhook_type, operations, timeout_seconds, failure_policy, ordering, ca_bundle, resource_version, created_at, updated_at)
		VALUES (?, NULL, NULL, ?, ?, ?, ?, ?, 0, NULL, ?, ?, ?)`,
		w.Name, w.URL, w.Type, text(w.Operations), w.TimeoutSeconds, w.FailurePolicy, hookRev, us, us); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE relay_state SET published_revision = ?, last_event_revision = ? WHERE id = 1`, purgeRev, purgeRev)
	return err
}
