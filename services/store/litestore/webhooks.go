package litestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/no8s/no8s/services/internal/webhookconf"
	"github.com/no8s/no8s/services/store/storage"
)

const webhookColumns = `id, name, resource_type_name, resource_type_version, webhook_url, webhook_type, operations,
	timeout_seconds, failure_policy, ordering, ca_bundle, resource_version, created_at, updated_at, namespaces`

func scanWebhook(row scanner) (*webhookconf.Webhook, error) {
	var w webhookconf.Webhook
	var typeName, typeVersion, ca sql.NullString
	var ops, namespaces string
	var created, updated int64
	if err := row.Scan(&w.ID, &w.Name, &typeName, &typeVersion, &w.URL, &w.Type, &ops,
		&w.TimeoutSeconds, &w.FailurePolicy, &w.Ordering, &ca, &w.ResourceVersion, &created, &updated, &namespaces); err != nil {
		return nil, err
	}
	var err error
	if w.Namespaces, err = storage.DecodeNamespaces([]byte(namespaces)); err != nil {
		return nil, fmt.Errorf("webhook %d: %w", w.ID, err)
	}
	if err := decodeJSON(ops, &w.Operations); err != nil {
		return nil, fmt.Errorf("webhook %d: %w", w.ID, err)
	}
	w.ResourceTypeName, w.ResourceTypeVersion, w.CABundle = typeName.String, typeVersion.String, ca.String
	w.CreatedAt, w.UpdatedAt = timeOf(created), timeOf(updated)
	return &w, nil
}

// nullable is s as stored: NULL when empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// CreateWebhook registers an admission webhook. Webhook writes, like every
// write, are serialized: a reader's snapshot always holds a prefix of them,
// which is what makes the set version change whenever the set does.
func (s *Store) CreateWebhook(ctx context.Context, w webhookconf.Webhook, dryRun bool) (*webhookconf.Webhook, error) {
	ops, namespaces, err := storage.CheckWebhook(&w)
	if err != nil {
		return nil, err
	}
	var out *webhookconf.Webhook
	err = s.write(ctx, dryRun, func(tx *wtx) error {
		rev, err := tx.takeVersion(ctx)
		if err != nil {
			return err
		}
		out, err = scanWebhook(tx.QueryRowContext(ctx, `INSERT INTO admission_webhooks (name, resource_type_name, resource_type_version,
			webhook_url, webhook_type, operations, timeout_seconds, failure_policy, ordering, ca_bundle, resource_version, created_at, updated_at,
			namespaces)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+webhookColumns,
			w.Name, nullable(w.ResourceTypeName), nullable(w.ResourceTypeVersion), w.URL, w.Type, string(ops),
			w.TimeoutSeconds, w.FailurePolicy, w.Ordering, nullable(w.CABundle), rev, micros(tx.now), micros(tx.now), string(namespaces)))
		return err
	})
	if err != nil {
		return nil, storage.WebhookNameTaken(err, w.Name)
	}
	return out, nil
}

// GetWebhook returns one webhook.
func (s *Store) GetWebhook(ctx context.Context, id int64) (*webhookconf.Webhook, error) {
	w, err := scanWebhook(s.r.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("admission webhook %d not found", id)
	}
	return w, translate(err)
}

// ListWebhooks lists every webhook unless the set's version
// (storage.SetVersion) is unless: then it answers NotModified with one cheap
// query (storage.ListWebhooks).
func (s *Store) ListWebhooks(ctx context.Context, unless string) (*storage.ListWebhooksResult, error) {
	res, err := storage.ListWebhooks(unless, func() (maxRev int64, n int, err error) {
		err = s.r.QueryRowContext(ctx, `SELECT coalesce(max(resource_version), 0), count(*) FROM admission_webhooks`).Scan(&maxRev, &n)
		return maxRev, n, err
	}, func() ([]*webhookconf.Webhook, error) {
		rows, err := s.r.QueryContext(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks ORDER BY webhook_type, ordering, name`)
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
	err = s.write(ctx, dryRun, func(tx *wtx) error {
		cur, err := scanWebhook(tx.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM admission_webhooks WHERE id = ?`, w.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("admission webhook %d not found", w.ID)
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
		rev, err := tx.takeVersion(ctx)
		if err != nil {
			return err
		}
		out, err = scanWebhook(tx.QueryRowContext(ctx, `UPDATE admission_webhooks SET name = ?, resource_type_name = ?, resource_type_version = ?,
			webhook_url = ?, webhook_type = ?, operations = ?, timeout_seconds = ?, failure_policy = ?, ordering = ?, ca_bundle = ?,
			resource_version = ?, updated_at = ?, namespaces = ? WHERE id = ? RETURNING `+webhookColumns,
			w.Name, nullable(w.ResourceTypeName), nullable(w.ResourceTypeVersion), w.URL, w.Type, string(ops),
			w.TimeoutSeconds, w.FailurePolicy, w.Ordering, nullable(w.CABundle), rev, micros(tx.now), string(namespaces), w.ID))
		return err
	})
	if err != nil {
		return nil, storage.WebhookNameTaken(err, w.Name)
	}
	return out, nil
}

// DeleteWebhook removes a webhook.
func (s *Store) DeleteWebhook(ctx context.Context, id int64, dryRun bool) error {
	return s.write(ctx, dryRun, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM admission_webhooks WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return notFound("admission webhook %d not found", id)
		}
		return nil
	})
}
