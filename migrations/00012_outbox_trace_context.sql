-- +goose Up
-- The trace context of the change an outbox row records (W3C traceparent,
-- and tracestate after a newline), written by the commit path in the same
-- statement as the row, so that the relay's publish continues the change's
-- trace even after a relay restart or failover. NULL for a change made
-- without tracing, and for every row written before this migration: those
-- publish as before (docs/observability.md).
ALTER TABLE outbox ADD COLUMN trace_context text;

-- +goose Down
ALTER TABLE outbox DROP COLUMN trace_context;
