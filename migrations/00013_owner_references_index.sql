-- +goose Up
-- The garbage collector's reads (docs/design/relationships.md): the
-- dependents of an owner by containment (owner_references @>
-- '[{"uid": …}]'), and the sweep of every resource that has owner
-- references, by id.
CREATE INDEX resources_owner_references ON resources USING gin (owner_references jsonb_path_ops);
CREATE INDEX resources_owned ON resources (id) WHERE owner_references <> '[]'::jsonb;

-- +goose Down
DROP INDEX resources_owned;
DROP INDEX resources_owner_references;
