-- +goose Up
-- Reconciliation (issue 3, docs/design/reconcile.md): per-type scheduling
-- policy, per-resource reconcile leases with a fencing epoch, scheduling
-- bookkeeping, richer history, and the scheduler's leadership lease.

-- reconcile_policy holds only the fields a type set; the store fills the
-- defaults when it reads (NULL = every default).
ALTER TABLE resource_types ADD COLUMN reconcile_policy jsonb;

ALTER TABLE resources
    -- The reconcile lease: its holder ('' when free), its epoch (never
    -- decreases; +1 on every acquisition) and its expiry.
    ADD COLUMN lease_holder           text        NOT NULL DEFAULT '',
    ADD COLUMN lease_epoch            bigint      NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_at       timestamptz,
    -- When the current (or last) lease was acquired: the attempt's start.
    ADD COLUMN lease_acquired_at      timestamptz,
    -- Consecutive failed attempts; reset by a success or a spec change.
    ADD COLUMN failures               integer     NOT NULL DEFAULT 0,
    -- The generation a terminal error was reported for (0: none).
    ADD COLUMN terminal_generation    bigint      NOT NULL DEFAULT 0,
    -- A manual trigger not yet consumed by an attempt.
    ADD COLUMN reconcile_requested_at timestamptz,
    -- The scheduler's last dispatch.
    ADD COLUMN dispatched_at          timestamptz,
    ADD COLUMN dispatch_id            text        NOT NULL DEFAULT '',
    -- When the last attempt asked to come back.
    ADD COLUMN requeue_at             timestamptz;

-- started_at and duration_ms exist since 00001.
ALTER TABLE reconciliation_history
    ADD COLUMN lease_epoch bigint NOT NULL DEFAULT 0,
    ADD COLUMN holder      text   NOT NULL DEFAULT '',
    ADD COLUMN reason      text   NOT NULL DEFAULT '';

-- scheduler_state is the scheduler's leadership lease; epoch is its fencing
-- token (+1 on every takeover).
CREATE TABLE scheduler_state (
    id               integer     PRIMARY KEY CHECK (id = 1),
    epoch            bigint      NOT NULL DEFAULT 0,
    holder           text        NOT NULL DEFAULT '',
    lease_expires_at timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
INSERT INTO scheduler_state (id) VALUES (1);

-- +goose Down
DROP TABLE scheduler_state;
ALTER TABLE reconciliation_history
    DROP COLUMN reason,
    DROP COLUMN holder,
    DROP COLUMN lease_epoch;
ALTER TABLE resources
    DROP COLUMN requeue_at,
    DROP COLUMN dispatch_id,
    DROP COLUMN dispatched_at,
    DROP COLUMN reconcile_requested_at,
    DROP COLUMN terminal_generation,
    DROP COLUMN failures,
    DROP COLUMN lease_acquired_at,
    DROP COLUMN lease_expires_at,
    DROP COLUMN lease_epoch,
    DROP COLUMN lease_holder;
ALTER TABLE resource_types DROP COLUMN reconcile_policy;
