-- +goose Up
-- What each resource's last attempt depends on (see
-- ../00014_dependencies.sql): a JSON array, as text.
ALTER TABLE resources ADD COLUMN dependencies TEXT NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE resources DROP COLUMN dependencies;
