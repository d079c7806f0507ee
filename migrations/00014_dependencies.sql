-- +goose Up
-- What each resource's last attempt depends on beyond its children
-- (Watches, WaitFor; docs/design/relationships.md): a JSON array of
-- {type_name, type_version, namespace, name, wait}, written by
-- CompleteReconcile and read by the scheduler with the reconcile state.
ALTER TABLE resources ADD COLUMN dependencies jsonb NOT NULL DEFAULT '[]'::jsonb;

-- +goose Down
ALTER TABLE resources DROP COLUMN dependencies;
