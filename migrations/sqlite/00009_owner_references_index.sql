-- +goose Up
-- The garbage collector's reads in SQLite's terms (see
-- ../00013_owner_references_index.sql): SQLite cannot index inside a JSON
-- array, so owner_refs holds one row per (owner uid, dependent), kept by
-- triggers on resources and filled once here from the rows that exist.
CREATE TABLE owner_refs (
    owner_uid   TEXT    NOT NULL,
    resource_id INTEGER NOT NULL,
    PRIMARY KEY (owner_uid, resource_id)
) WITHOUT ROWID;
CREATE INDEX owner_refs_resource ON owner_refs (resource_id);

-- +goose StatementBegin
CREATE TRIGGER resources_owner_refs_insert AFTER INSERT ON resources
WHEN NEW.owner_references <> '[]'
BEGIN
    INSERT OR IGNORE INTO owner_refs (owner_uid, resource_id)
        SELECT json_extract(value, '$.uid'), NEW.id FROM json_each(NEW.owner_references)
        WHERE json_extract(value, '$.uid') IS NOT NULL;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER resources_owner_refs_update AFTER UPDATE OF owner_references ON resources
BEGIN
    DELETE FROM owner_refs WHERE resource_id = NEW.id;
    INSERT OR IGNORE INTO owner_refs (owner_uid, resource_id)
        SELECT json_extract(value, '$.uid'), NEW.id FROM json_each(NEW.owner_references)
        WHERE json_extract(value, '$.uid') IS NOT NULL;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER resources_owner_refs_delete AFTER DELETE ON resources
BEGIN
    DELETE FROM owner_refs WHERE resource_id = OLD.id;
END;
-- +goose StatementEnd

INSERT OR IGNORE INTO owner_refs (owner_uid, resource_id)
    SELECT json_extract(j.value, '$.uid'), r.id FROM resources r, json_each(r.owner_references) j
    WHERE r.owner_references <> '[]' AND json_extract(j.value, '$.uid') IS NOT NULL;

-- +goose Down
DROP TRIGGER resources_owner_refs_delete;
DROP TRIGGER resources_owner_refs_update;
DROP TRIGGER resources_owner_refs_insert;
DROP TABLE owner_refs;
