-- +goose Up
-- Each resource's document as its last change rendered it: the bytes its
-- event carried (storage.RenderEvent), written in the same statement as the
-- change, with the resource_version it was rendered at. A list serves the
-- stored document while document_version equals the row's resource_version,
-- instead of turning every row's jsonb columns back into text
-- (docs/design/performance.md). Otherwise it renders the row from its
-- columns, as before: rows no change has touched since this migration, and
-- rows changed by a store of the previous release during a rolling upgrade
-- (every change takes a new resource_version; that release leaves these
-- columns as they were).
ALTER TABLE resources ADD COLUMN document bytea;
ALTER TABLE resources ADD COLUMN document_version bigint;

-- +goose Down
ALTER TABLE resources DROP COLUMN document_version;
ALTER TABLE resources DROP COLUMN document;
