-- +goose Up
-- revision_seq hands out the global, strictly increasing resource_version.
-- Every write transaction first takes a transaction id, then its revisions,
-- so the outbox relay can tell when all revisions up to a value are settled
-- (see docs/design/outbox.md).
CREATE SEQUENCE revision_seq AS bigint;

CREATE TABLE resource_types (
    id               bigserial PRIMARY KEY,
    name             text        NOT NULL,
    version          text        NOT NULL,
    description      text        NOT NULL DEFAULT '',
    schema           jsonb       NOT NULL,
    resource_version bigint      NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CONSTRAINT resource_types_name_version_key UNIQUE (name, version)
);

CREATE TABLE resources (
    id                    bigint      PRIMARY KEY,
    uid                   uuid        NOT NULL UNIQUE,
    name                  text        NOT NULL,
    resource_type_id      bigint      NOT NULL REFERENCES resource_types (id) ON DELETE RESTRICT,
    resource_type_name    text        NOT NULL,
    resource_type_version text        NOT NULL,
    labels                jsonb       NOT NULL DEFAULT '{}',
    annotations           jsonb       NOT NULL DEFAULT '{}',
    owner_references      jsonb       NOT NULL DEFAULT '[]',
    spec                  jsonb       NOT NULL,
    status                text        NOT NULL,
    status_message        text        NOT NULL DEFAULT '',
    generation            bigint      NOT NULL,
    observed_generation   bigint      NOT NULL DEFAULT 0,
    resource_version      bigint      NOT NULL,
    conditions            jsonb       NOT NULL DEFAULT '[]',
    phase                 text        NOT NULL,
    outputs               jsonb       NOT NULL DEFAULT '{}',
    finalizers            jsonb       NOT NULL DEFAULT '[]',
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    deleted_at            timestamptz,
    last_reconcile_time   timestamptz,
    CONSTRAINT resources_type_name_key UNIQUE (resource_type_name, resource_type_version, name)
);
CREATE SEQUENCE resources_id_seq AS bigint OWNED BY resources.id;
CREATE INDEX resources_type_id_idx ON resources (resource_type_name, resource_type_version, id);
CREATE INDEX resources_type_fk_idx ON resources (resource_type_id);
CREATE INDEX resources_status_idx ON resources (status, id);
CREATE INDEX resources_labels_idx ON resources USING gin (labels jsonb_path_ops);

CREATE TABLE reconciliation_history (
    id                bigserial   PRIMARY KEY,
    resource_id       bigint      NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    generation        bigint      NOT NULL,
    success           boolean     NOT NULL,
    phase             text        NOT NULL,
    error_message     text,
    resources_created integer     NOT NULL DEFAULT 0,
    resources_updated integer     NOT NULL DEFAULT 0,
    resources_deleted integer     NOT NULL DEFAULT 0,
    started_at        timestamptz,
    duration_ms       bigint      NOT NULL DEFAULT 0,
    reconcile_time    timestamptz NOT NULL
);
CREATE INDEX reconciliation_history_resource_idx ON reconciliation_history (resource_id, id DESC);

CREATE TABLE admission_webhooks (
    id                    bigserial   PRIMARY KEY,
    name                  text        NOT NULL UNIQUE,
    resource_type_name    text,
    resource_type_version text,
    webhook_url           text        NOT NULL,
    webhook_type          text        NOT NULL CHECK (webhook_type IN ('mutating', 'validating')),
    operations            jsonb       NOT NULL,
    timeout_seconds       integer     NOT NULL DEFAULT 10 CHECK (timeout_seconds BETWEEN 1 AND 30),
    failure_policy        text        NOT NULL DEFAULT 'Fail' CHECK (failure_policy IN ('Fail', 'Ignore')),
    ordering              integer     NOT NULL DEFAULT 0,
    ca_bundle             text,
    resource_version      bigint      NOT NULL,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL
);

-- outbox holds one row per committed change, written in the change's own
-- transaction; the relay publishes them to JetStream in revision order.
CREATE TABLE outbox (
    revision    bigint      PRIMARY KEY,
    resource_id bigint      NOT NULL,
    event_type  text        NOT NULL,
    subject     text        NOT NULL,
    payload     bytea       NOT NULL,
    created_at  timestamptz NOT NULL
);

-- relay_state is the relay's cursor and leader epoch (a fencing token).
CREATE TABLE relay_state (
    id                 integer     PRIMARY KEY CHECK (id = 1),
    published_revision bigint      NOT NULL DEFAULT 0,
    epoch              bigint      NOT NULL DEFAULT 0,
    updated_at         timestamptz NOT NULL DEFAULT now()
);
INSERT INTO relay_state (id) VALUES (1);

-- +goose Down
DROP TABLE relay_state;
DROP TABLE outbox;
DROP TABLE admission_webhooks;
DROP TABLE reconciliation_history;
DROP TABLE resources;
DROP TABLE resource_types;
DROP SEQUENCE revision_seq;
