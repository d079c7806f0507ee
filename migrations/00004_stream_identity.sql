-- +goose Up
-- The database's identity, made once: the event stream records it (stream
-- metadata and a header on every event), so a store never publishes into, or
-- skips revisions of, a stream that another database (or an older copy of
-- this one) filled. See docs/design/outbox.md ("The stream and the database").
-- last_event_revision is the newest event published, pruned_revision the newest
-- outbox row deleted: together they tell the relay what a stream that lost
-- events is missing and whether the outbox still holds it.
ALTER TABLE relay_state
    ADD COLUMN store_id            uuid   NOT NULL DEFAULT gen_random_uuid(),
    ADD COLUMN last_event_revision bigint DEFAULT 0,
    ADD COLUMN pruned_revision     bigint NOT NULL DEFAULT 0;
-- A store upgraded in place: its newest published event is the newest outbox
-- row at or below its cursor; when the outbox no longer holds one it is
-- unknown (NULL) until the relay next publishes. Rows already pruned are below
-- the oldest remaining row.
UPDATE relay_state SET
    last_event_revision = CASE WHEN published_revision = 0 THEN 0
        ELSE (SELECT max(revision) FROM outbox WHERE revision <= published_revision) END,
    pruned_revision = COALESCE((SELECT min(revision) - 1 FROM outbox), published_revision);

-- +goose Down
ALTER TABLE relay_state
    DROP COLUMN pruned_revision,
    DROP COLUMN last_event_revision,
    DROP COLUMN store_id;
