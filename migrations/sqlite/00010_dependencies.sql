-- +goose Up
-- What each resource's last attempt depends on (see
-- ../00014_dependencies.sql): a JSON array, as text.
ALTER TABLE resources ADD COLUMN dependencies TEXT NOT NULL DEFAULT '[]';
-- The relay's published revision when the lease was last acquired (see
-- ../00014_dependencies.sql).
ALTER TABLE resources ADD COLUMN lease_revision INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE resources DROP COLUMN lease_revision;
ALTER TABLE resources DROP COLUMN dependencies;
