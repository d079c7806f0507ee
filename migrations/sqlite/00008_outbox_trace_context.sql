-- +goose Up
-- The outbox row's trace context in SQLite's terms (see
-- ../00012_outbox_trace_context.sql).
ALTER TABLE outbox ADD COLUMN trace_context TEXT;

-- +goose Down
ALTER TABLE outbox DROP COLUMN trace_context;
