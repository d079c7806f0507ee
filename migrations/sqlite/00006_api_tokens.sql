-- +goose Up
-- API tokens in SQLite's terms (see ../00010_api_tokens.sql): groups as
-- JSON text, times as microseconds since the epoch, the flag as 0 or 1.
CREATE TABLE api_tokens (
    id              TEXT    PRIMARY KEY,
    name            TEXT    NOT NULL,
    owner           TEXT    NOT NULL,
    groups          TEXT    NOT NULL DEFAULT '[]',
    service_account INTEGER NOT NULL DEFAULT 0 CHECK (service_account IN (0, 1)),
    created_by      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER,
    revoked_at      INTEGER,
    secret_hash     BLOB    NOT NULL CHECK (length(secret_hash) = 32)
);
CREATE UNIQUE INDEX api_tokens_owner_name_idx ON api_tokens (owner, name) WHERE revoked_at IS NULL;
CREATE INDEX api_tokens_owner_created_idx ON api_tokens (owner, created_at);

-- +goose Down
DROP TABLE api_tokens;
