-- +goose Up
-- Namespaces (issue 12; docs/api.md, "Namespaces"): every resource belongs to
-- one, and a resource's name is unique per (type, version, namespace). The
-- resources stored before this migration land in "default", which always
-- exists.

-- A namespace is active until deleted_at is set; it is then terminating until
-- its last resource is gone, and its row goes with it. resource_version is
-- the global revision of its last change (namespaces have no events).
CREATE TABLE namespaces (
    name             text        PRIMARY KEY,
    uid              uuid        NOT NULL UNIQUE,
    resource_version bigint      NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    deleted_at       timestamptz
);
INSERT INTO namespaces (name, uid, resource_version, created_at, updated_at)
    VALUES ('default', gen_random_uuid(), nextval('revision_seq'), now(), now());

-- Adding a column with a constant default rewrites no row (PostgreSQL 11+):
-- every existing resource reads 'default' at once, whatever the table's size.
-- The default stays, so that a store of the previous release still running
-- during a rolling upgrade creates its resources in "default" too; this
-- release always names the namespace. No foreign key to namespaces: its
-- FOR KEY SHARE lock would make every concurrent create in a namespace share
-- one row lock (see 00002); the store keeps creates out of a namespace being
-- deleted with an advisory lock instead (pgstore/namespaces.go).
ALTER TABLE resources ADD COLUMN namespace text NOT NULL DEFAULT 'default';

-- Names are unique per (type, version, namespace): the by-name read's index.
ALTER TABLE resources DROP CONSTRAINT resources_type_name_key;
ALTER TABLE resources ADD CONSTRAINT resources_type_name_key
    UNIQUE (resource_type_name, resource_type_version, namespace, name);

-- Lists go by ascending id. A list of one type in one namespace walks
-- (type, version, namespace, id) in order; one of every type in one
-- namespace, and a namespace's deletion, walk (namespace, id). A list of one
-- type across namespaces keeps resources_type_id_idx (type, version, id), and
-- label selectors keep the GIN index on labels.
CREATE INDEX resources_type_ns_id_idx ON resources (resource_type_name, resource_type_version, namespace, id);
CREATE INDEX resources_ns_id_idx ON resources (namespace, id);

-- An admission webhook may be scoped to namespaces: an empty list matches
-- every namespace.
ALTER TABLE admission_webhooks ADD COLUMN namespaces jsonb NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE admission_webhooks DROP COLUMN namespaces;
DROP INDEX resources_ns_id_idx;
DROP INDEX resources_type_ns_id_idx;
-- Fails when a name is used in two namespaces: such a store cannot go back.
ALTER TABLE resources DROP CONSTRAINT resources_type_name_key;
ALTER TABLE resources ADD CONSTRAINT resources_type_name_key
    UNIQUE (resource_type_name, resource_type_version, name);
ALTER TABLE resources DROP COLUMN namespace;
DROP TABLE namespaces;
