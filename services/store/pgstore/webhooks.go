package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/webhookconf"
	"github.com/no8s/no8s/services/store/storage"
)

const webhookColumns = `id, name, resource_type_name, resource_type_version, webhook_url, webhook_type, operations,
	timeout_seconds, failure_policy, ordering, ca_bundle, resource_version, created_at, updated_at, namespaces`

func scanWebhook(row pgx.Row) (*webhookconf.Webhook, error) {
	var w webhookconf.Webhook
	var typeName, typeVersion, ca *string
	var ops, namespaces []byte
	if err := row.Scan(&w.ID, &w.Name, &typeName, &typeVersion, &w.URL, &w.Type, &ops,
		&w.TimeoutSeconds, &w.FailurePolicy, &w.Ordering, &ca, &w.ResourceVersion, &w.CreatedAt, &w.UpdatedAt, &namespaces); err != nil {
		return nil, err
	}
	var err error
	if w.Namespaces, err = storage.DecodeNamespaces(namespaces); err != nil {
		return nil, fmt.Errorf("webhook %d: %w", w.ID, err)
	}
	if err := json.Unmarshal(ops, &w.Operations); err != nil {
		return nil, fmt.Errorf("webhook %d: decode operations: %w", w.ID, err)
	}
	w.ResourceTypeName, w.ResourceTypeVersion, w.CABundle = deref(typeName), deref(typeVersion), deref(ca)
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return &w, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// lockWebhooks serializes webhook writes, so that they commit in the order
// of their revisions and a reader's snapshot always holds a prefix of them:
// that is what makes ListWebhooks' set version change whenever the set does.
// Readers are not blocked.
func lockWebhooks(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `LOCK TABLE admission_webhooks IN SHARE ROW EXCLUSIVE MODE`)
	return err
}

// CreateWebhook registers an admission webhook.
func (s *Store) CreateWebhook(ctx context.Context, w webhookconf.Webhook, dryRun bool) (*webhookconf.Webhook, error) {
	ops, namespaces, err := storage.CheckWebhook(&w)
	if err != nil {
		return nil, err
	}
	var out *webhookconf.Webhook
	err = s.write(ctx, dryRun, func(tx pgx.Tx) error {
		if err := lockWebhooks(ctx, tx); err != nil {
			return err
		}
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanWebhook(tx.QueryRow(ctx, `INSERT INTO admission_webhooks (name, resource_type_name, resource_type_version,
			webhook_url, webhook_type, operations, timeout_seconds, failure_policy, ordering, ca_bundle, resource_version, created_at, updated_at,
			namespaces)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13) RETURNING `+webhookColumns,
			w.Name, nullable(w.ResourceTypeName), nullable(w.ResourceTypeVersion), w.URL, w.Type, ops,
			w.TimeoutSeconds, w.FailurePolicy, w.Ordering, nullable(w.CABundle), rev, now, namespaces))
		return err
	})
	if err != nil {
		return nil, storage.WebhookNameTaken(err, w.Name)
	}
	return out, nil
}

// GetWebhook returns one webhook.
func (s *Store) GetWebhook(ctx context.Context, id int64) (*webhookconf.Webhook, error) {
	w, err := scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.NotFound("admission webhook %d not found", id)
	}
	return w, translate(err)
}

// ListWebhooks lists every webhook unless the set's version
// (storage.SetVersion) is unless: then it answers NotModified with one cheap
// query (storage.ListWebhooks).
func (s *Store) ListWebhooks(ctx context.Context, unless string) (*storage.ListWebhooksResult, error) {
	res, err := storage.ListWebhooks(unless, func() (maxRev int64, n int, err error) {
		err = s.pool.QueryRow(ctx, `SELECT coalesce(max(resource_version), 0), count(*) FROM admission_webhooks`).Scan(&maxRev, &n)
		return maxRev, n, err
	}, func() ([]*webhookconf.Webhook, error) {
		rows, err := s.pool.Query(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks ORDER BY webhook_type, ordering, name`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []*webhookconf.Webhook
		for rows.Next() {
			w, err := scanWebhook(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, w)
		}
		return out, rows.Err()
	})
	return res, translate(err)
}

// UpdateWebhook replaces every registration field of webhook w.ID. A
// non-zero expected must equal the current resource_version.
func (s *Store) UpdateWebhook(ctx context.Context, w webhookconf.Webhook, expected int64, dryRun bool) (*webhookconf.Webhook, error) {
	ops, namespaces, err := storage.CheckWebhook(&w)
	if err != nil {
		return nil, err
	}
	var out *webhookconf.Webhook
	err = s.write(ctx, dryRun, func(tx pgx.Tx) error {
		if err := lockWebhooks(ctx, tx); err != nil {
			return err
		}
		cur, err := scanWebhook(tx.QueryRow(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks WHERE id = $1`, w.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.NotFound("admission webhook %d not found", w.ID)
		}
		if err != nil {
			return err
		}
		if expected != 0 && expected != cur.ResourceVersion {
			return storage.Conflict(fmt.Sprintf("admission webhook %d", w.ID), cur.ResourceVersion, expected)
		}
		if storage.SameRegistration(cur, &w) {
			out = cur
			return nil
		}
		rev, now, err := takeVersion(ctx, tx)
		if err != nil {
			return err
		}
		out, err = scanWebhook(tx.QueryRow(ctx, `UPDATE admission_webhooks SET name = $2, resource_type_name = $3, resource_type_version = $4,
			webhook_url = $5, webhook_type = $6, operations = $7, timeout_seconds = $8, failure_policy = $9, ordering = $10, ca_bundle = $11,
			resource_version = $12, updated_at = $13, namespaces = $14 WHERE id = $1 RETURNING `+webhookColumns,
			w.ID, w.Name, nullable(w.ResourceTypeName), nullable(w.ResourceTypeVersion), w.URL, w.Type, ops,
			w.TimeoutSeconds, w.FailurePolicy, w.Ordering, nullable(w.CABundle), rev, now, namespaces))
		return err
	})
	if err != nil {
		return nil, storage.WebhookNameTaken(err, w.Name)
	}
	return out, nil
}

// DeleteWebhook removes a webhook.
func (s *Store) DeleteWebhook(ctx context.Context, id int64, dryRun bool) error {
	return s.write(ctx, dryRun, func(tx pgx.Tx) error {
		if err := lockWebhooks(ctx, tx); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM admission_webhooks WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return storage.NotFound("admission webhook %d not found", id)
		}
		return nil
	})
}
