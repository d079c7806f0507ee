-- +goose Up
-- What each resource's last attempt depends on beyond its children
-- (Watches, WaitFor; docs/design/relationships.md): a JSON array of
-- {type_name, type_version, namespace, name, wait}, written by
-- CompleteReconcile and read by the scheduler with the reconcile state.
ALTER TABLE resources ADD COLUMN dependencies jsonb NOT NULL DEFAULT '[]'::jsonb;
-- The relay's published revision when the resource's lease was last
-- acquired: every change published by then was committed before that
-- attempt began, so the scheduler need not reconcile the resource again for
-- one it counted meanwhile.
ALTER TABLE resources ADD COLUMN lease_revision bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE resources DROP COLUMN lease_revision;
ALTER TABLE resources DROP COLUMN dependencies;
