-- +goose Up
-- Creating a resource no longer locks its type row (FOR SHARE and the foreign
-- key's FOR KEY SHARE turn every concurrent create into a MultiXact on the
-- same row). A type's deletion is instead serialised against creates with a
-- transaction-level advisory lock keyed by the type id: creates take it
-- shared, DeleteType exclusive. See docs/design/outbox.md ("Type locks").
ALTER TABLE resources DROP CONSTRAINT resources_resource_type_id_fkey;

-- +goose Down
ALTER TABLE resources ADD CONSTRAINT resources_resource_type_id_fkey
    FOREIGN KEY (resource_type_id) REFERENCES resource_types (id) ON DELETE RESTRICT;
