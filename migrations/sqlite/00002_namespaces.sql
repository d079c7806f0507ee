-- +goose Up
-- Namespaces (issue 12; PostgreSQL's 00005 in SQLite's terms): every resource
-- belongs to one, and a resource's name is unique per (type, version,
-- namespace). The resources stored before this migration land in "default",
-- which always exists.

-- A namespace is active until deleted_at is set; it is then terminating until
-- its last resource is gone, and its row goes with it.
CREATE TABLE namespaces (
    name             TEXT    PRIMARY KEY,
    uid              TEXT    NOT NULL UNIQUE,
    resource_version INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    deleted_at       INTEGER
);
UPDATE revision_counter SET value = value + 1 WHERE id = 1;
INSERT INTO namespaces (name, uid, resource_version, created_at, updated_at)
SELECT 'default',
    lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' || substr(lower(hex(randomblob(2))), 2) || '-' ||
    substr('89ab', 1 + (abs(random()) % 4), 1) || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))),
    value, CAST(unixepoch('subsec') * 1000000 AS INTEGER), CAST(unixepoch('subsec') * 1000000 AS INTEGER)
FROM revision_counter WHERE id = 1;

-- SQLite cannot change a table's UNIQUE constraint: the resources table is
-- rebuilt with the namespace column and the new constraint, in this
-- migration's transaction. Dropping the old table cascades to the
-- reconciliation history (foreign_keys is on, and cannot be turned off
-- inside a transaction), so the history is kept aside and put back. The
-- table's AUTOINCREMENT high-water mark is carried over, so that no id of a
-- purged resource is ever handed out again.
CREATE TABLE resources_new (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    uid                    TEXT    NOT NULL UNIQUE,
    namespace              TEXT    NOT NULL DEFAULT 'default',
    name                   TEXT    NOT NULL,
    resource_type_id       INTEGER NOT NULL REFERENCES resource_types (id) ON DELETE RESTRICT,
    resource_type_name     TEXT    NOT NULL,
    resource_type_version  TEXT    NOT NULL,
    labels                 TEXT    NOT NULL DEFAULT '{}',
    annotations            TEXT    NOT NULL DEFAULT '{}',
    owner_references       TEXT    NOT NULL DEFAULT '[]',
    spec                   TEXT    NOT NULL,
    status                 TEXT    NOT NULL,
    status_message         TEXT    NOT NULL DEFAULT '',
    generation             INTEGER NOT NULL,
    observed_generation    INTEGER NOT NULL DEFAULT 0,
    resource_version       INTEGER NOT NULL,
    conditions             TEXT    NOT NULL DEFAULT '[]',
    phase                  TEXT    NOT NULL,
    outputs                TEXT    NOT NULL DEFAULT '{}',
    finalizers             TEXT    NOT NULL DEFAULT '[]',
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    deleted_at             INTEGER,
    last_reconcile_time    INTEGER,
    lease_holder           TEXT    NOT NULL DEFAULT '',
    lease_epoch            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at       INTEGER,
    lease_acquired_at      INTEGER,
    failures               INTEGER NOT NULL DEFAULT 0,
    terminal_generation    INTEGER NOT NULL DEFAULT 0,
    reconcile_requested_at INTEGER,
    dispatched_at          INTEGER,
    dispatch_id            TEXT    NOT NULL DEFAULT '',
    requeue_at             INTEGER,
    CONSTRAINT resources_type_name_key UNIQUE (resource_type_name, resource_type_version, namespace, name)
);
INSERT INTO sqlite_sequence (name, seq) SELECT 'resources_new', seq FROM sqlite_sequence WHERE name = 'resources';
INSERT INTO resources_new (id, uid, namespace, name, resource_type_id, resource_type_name, resource_type_version, labels,
    annotations, owner_references, spec, status, status_message, generation, observed_generation, resource_version,
    conditions, phase, outputs, finalizers, created_at, updated_at, deleted_at, last_reconcile_time, lease_holder,
    lease_epoch, lease_expires_at, lease_acquired_at, failures, terminal_generation, reconcile_requested_at,
    dispatched_at, dispatch_id, requeue_at)
SELECT id, uid, 'default', name, resource_type_id, resource_type_name, resource_type_version, labels,
    annotations, owner_references, spec, status, status_message, generation, observed_generation, resource_version,
    conditions, phase, outputs, finalizers, created_at, updated_at, deleted_at, last_reconcile_time, lease_holder,
    lease_epoch, lease_expires_at, lease_acquired_at, failures, terminal_generation, reconcile_requested_at,
    dispatched_at, dispatch_id, requeue_at
FROM resources;
CREATE TEMP TABLE history_kept AS SELECT * FROM reconciliation_history;
DROP TABLE resources;
ALTER TABLE resources_new RENAME TO resources;
INSERT INTO reconciliation_history SELECT * FROM history_kept;
DROP TABLE history_kept;

-- Lists go by ascending id: of one type across namespaces by (type,
-- version, id), of one type in one namespace by (type, version, namespace,
-- id), of one namespace (and a namespace's deletion) by (namespace, id).
CREATE INDEX resources_type_id_idx ON resources (resource_type_name, resource_type_version, id);
CREATE INDEX resources_type_ns_id_idx ON resources (resource_type_name, resource_type_version, namespace, id);
CREATE INDEX resources_ns_id_idx ON resources (namespace, id);
CREATE INDEX resources_type_fk_idx ON resources (resource_type_id);
CREATE INDEX resources_status_idx ON resources (status, id);

-- An admission webhook may be scoped to namespaces (a JSON array; empty:
-- every namespace).
ALTER TABLE admission_webhooks ADD COLUMN namespaces TEXT NOT NULL DEFAULT '[]';

-- +goose Down
-- Fails when a name is used in two namespaces: such a store cannot go back.
ALTER TABLE admission_webhooks DROP COLUMN namespaces;
CREATE TABLE resources_new (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    uid                    TEXT    NOT NULL UNIQUE,
    name                   TEXT    NOT NULL,
    resource_type_id       INTEGER NOT NULL REFERENCES resource_types (id) ON DELETE RESTRICT,
    resource_type_name     TEXT    NOT NULL,
    resource_type_version  TEXT    NOT NULL,
    labels                 TEXT    NOT NULL DEFAULT '{}',
    annotations            TEXT    NOT NULL DEFAULT '{}',
    owner_references       TEXT    NOT NULL DEFAULT '[]',
    spec                   TEXT    NOT NULL,
    status                 TEXT    NOT NULL,
    status_message         TEXT    NOT NULL DEFAULT '',
    generation             INTEGER NOT NULL,
    observed_generation    INTEGER NOT NULL DEFAULT 0,
    resource_version       INTEGER NOT NULL,
    conditions             TEXT    NOT NULL DEFAULT '[]',
    phase                  TEXT    NOT NULL,
    outputs                TEXT    NOT NULL DEFAULT '{}',
    finalizers             TEXT    NOT NULL DEFAULT '[]',
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    deleted_at             INTEGER,
    last_reconcile_time    INTEGER,
    lease_holder           TEXT    NOT NULL DEFAULT '',
    lease_epoch            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at       INTEGER,
    lease_acquired_at      INTEGER,
    failures               INTEGER NOT NULL DEFAULT 0,
    terminal_generation    INTEGER NOT NULL DEFAULT 0,
    reconcile_requested_at INTEGER,
    dispatched_at          INTEGER,
    dispatch_id            TEXT    NOT NULL DEFAULT '',
    requeue_at             INTEGER,
    CONSTRAINT resources_type_name_key UNIQUE (resource_type_name, resource_type_version, name)
);
INSERT INTO sqlite_sequence (name, seq) SELECT 'resources_new', seq FROM sqlite_sequence WHERE name = 'resources';
INSERT INTO resources_new (id, uid, name, resource_type_id, resource_type_name, resource_type_version, labels,
    annotations, owner_references, spec, status, status_message, generation, observed_generation, resource_version,
    conditions, phase, outputs, finalizers, created_at, updated_at, deleted_at, last_reconcile_time, lease_holder,
    lease_epoch, lease_expires_at, lease_acquired_at, failures, terminal_generation, reconcile_requested_at,
    dispatched_at, dispatch_id, requeue_at)
SELECT id, uid, name, resource_type_id, resource_type_name, resource_type_version, labels,
    annotations, owner_references, spec, status, status_message, generation, observed_generation, resource_version,
    conditions, phase, outputs, finalizers, created_at, updated_at, deleted_at, last_reconcile_time, lease_holder,
    lease_epoch, lease_expires_at, lease_acquired_at, failures, terminal_generation, reconcile_requested_at,
    dispatched_at, dispatch_id, requeue_at
FROM resources;
CREATE TEMP TABLE history_kept AS SELECT * FROM reconciliation_history;
DROP TABLE resources;
ALTER TABLE resources_new RENAME TO resources;
INSERT INTO reconciliation_history SELECT * FROM history_kept;
DROP TABLE history_kept;

CREATE INDEX resources_type_id_idx ON resources (resource_type_name, resource_type_version, id);
CREATE INDEX resources_type_fk_idx ON resources (resource_type_id);
CREATE INDEX resources_status_idx ON resources (status, id);
DROP TABLE namespaces;
