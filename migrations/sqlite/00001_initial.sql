-- +goose Up
-- The embedded store's schema (services/store/litestore): the PostgreSQL
-- schema of migrations 00001-00004 in one step, in SQLite's terms.
--
-- Types: timestamps are INTEGER microseconds since the Unix epoch (UTC), the
-- precision PostgreSQL keeps, so that a time reads back as it was written and
-- compares as a number; JSON documents are TEXT in compact form; uuids TEXT;
-- booleans INTEGER 0/1. Writers serialize on SQLite's write lock, so there
-- are no sequences and no advisory locks: a counter row hands out revisions
-- inside the write transaction, and AUTOINCREMENT keys are never reused.

-- revision_counter holds the last revision handed out: the global, strictly
-- increasing resource_version. Every write transaction that needs revisions
-- increments it; writes are serialized, so revisions commit in order.
CREATE TABLE revision_counter (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);
INSERT INTO revision_counter (id, value) VALUES (1, 0);

CREATE TABLE resource_types (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT    NOT NULL,
    version          TEXT    NOT NULL,
    description      TEXT    NOT NULL DEFAULT '',
    schema           TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    -- Only the fields a type set (NULL: every default).
    reconcile_policy TEXT,
    CONSTRAINT resource_types_name_version_key UNIQUE (name, version)
);

CREATE TABLE resources (
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
    -- The reconcile lease (docs/design/reconcile.md): holder ('' when free),
    -- epoch (+1 on every acquisition, never decreases), expiry, and when it
    -- was acquired (the attempt's start).
    lease_holder           TEXT    NOT NULL DEFAULT '',
    lease_epoch            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at       INTEGER,
    lease_acquired_at      INTEGER,
    -- Consecutive failed attempts; the generation a terminal error was
    -- reported for; a manual trigger not yet consumed; the scheduler's last
    -- dispatch; when the last attempt asked to come back.
    failures               INTEGER NOT NULL DEFAULT 0,
    terminal_generation    INTEGER NOT NULL DEFAULT 0,
    reconcile_requested_at INTEGER,
    dispatched_at          INTEGER,
    dispatch_id            TEXT    NOT NULL DEFAULT '',
    requeue_at             INTEGER,
    CONSTRAINT resources_type_name_key UNIQUE (resource_type_name, resource_type_version, name)
);
CREATE INDEX resources_type_id_idx ON resources (resource_type_name, resource_type_version, id);
CREATE INDEX resources_type_fk_idx ON resources (resource_type_id);
CREATE INDEX resources_status_idx ON resources (status, id);

CREATE TABLE reconciliation_history (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id       INTEGER NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    generation        INTEGER NOT NULL,
    success           INTEGER NOT NULL,
    phase             TEXT    NOT NULL,
    error_message     TEXT,
    resources_created INTEGER NOT NULL DEFAULT 0,
    resources_updated INTEGER NOT NULL DEFAULT 0,
    resources_deleted INTEGER NOT NULL DEFAULT 0,
    started_at        INTEGER,
    duration_ms       INTEGER NOT NULL DEFAULT 0,
    reconcile_time    INTEGER NOT NULL,
    lease_epoch       INTEGER NOT NULL DEFAULT 0,
    holder            TEXT    NOT NULL DEFAULT '',
    reason            TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX reconciliation_history_resource_idx ON reconciliation_history (resource_id, id DESC);

CREATE TABLE admission_webhooks (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    name                  TEXT    NOT NULL UNIQUE,
    resource_type_name    TEXT,
    resource_type_version TEXT,
    webhook_url           TEXT    NOT NULL,
    webhook_type          TEXT    NOT NULL CHECK (webhook_type IN ('mutating', 'validating')),
    operations            TEXT    NOT NULL,
    timeout_seconds       INTEGER NOT NULL DEFAULT 10 CHECK (timeout_seconds BETWEEN 1 AND 30),
    failure_policy        TEXT    NOT NULL DEFAULT 'Fail' CHECK (failure_policy IN ('Fail', 'Ignore')),
    ordering              INTEGER NOT NULL DEFAULT 0,
    ca_bundle             TEXT,
    resource_version      INTEGER NOT NULL,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

-- scheduler_state is the scheduler's leadership lease; epoch is its fencing
-- token (+1 on every takeover).
CREATE TABLE scheduler_state (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    epoch            INTEGER NOT NULL DEFAULT 0,
    holder           TEXT    NOT NULL DEFAULT '',
    lease_expires_at INTEGER,
    updated_at       INTEGER NOT NULL DEFAULT 0
);
INSERT INTO scheduler_state (id) VALUES (1);

-- outbox holds one row per committed change, written in the change's own
-- transaction; the relay publishes them to JetStream in revision order.
CREATE TABLE outbox (
    revision    INTEGER PRIMARY KEY,
    resource_id INTEGER NOT NULL,
    event_type  TEXT    NOT NULL,
    subject     TEXT    NOT NULL,
    payload     BLOB    NOT NULL,
    created_at  INTEGER NOT NULL
);

-- relay_state is the relay's cursor and leader epoch (a fencing token), and
-- the database's identity, made once (a random version 4 uuid): the event
-- stream records it, so a store never publishes into, or skips revisions of,
-- a stream another database filled. last_event_revision is the newest event
-- published, pruned_revision the newest outbox row deleted.
CREATE TABLE relay_state (
    id                  INTEGER PRIMARY KEY CHECK (id = 1),
    store_id            TEXT    NOT NULL,
    published_revision  INTEGER NOT NULL DEFAULT 0,
    last_event_revision INTEGER DEFAULT 0,
    pruned_revision     INTEGER NOT NULL DEFAULT 0,
    epoch               INTEGER NOT NULL DEFAULT 0,
    updated_at          INTEGER NOT NULL DEFAULT 0
);
INSERT INTO relay_state (id, store_id) VALUES (1,
    lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' || substr(lower(hex(randomblob(2))), 2) || '-' ||
    substr('89ab', 1 + (abs(random()) % 4), 1) || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))));

-- +goose Down
DROP TABLE relay_state;
DROP TABLE outbox;
DROP TABLE scheduler_state;
DROP TABLE admission_webhooks;
DROP TABLE reconciliation_history;
DROP TABLE resources;
DROP TABLE resource_types;
DROP TABLE revision_counter;
