-- +goose Up
-- API tokens (store.v1.TokenService): whom each authenticates as, until
-- when, and the SHA-256 of its secret (the secret itself is never stored).
-- A token's name is unique among its owner's tokens that are not revoked:
-- a revoked token's name may be used again. Tokens are not resources: no
-- revision, no event.
CREATE TABLE api_tokens (
    id              text        PRIMARY KEY,
    name            text        NOT NULL,
    owner           text        NOT NULL,
    groups          jsonb       NOT NULL DEFAULT '[]',
    service_account boolean     NOT NULL DEFAULT false,
    created_by      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz,
    revoked_at      timestamptz,
    secret_hash     bytea       NOT NULL CHECK (length(secret_hash) = 32)
);
CREATE UNIQUE INDEX api_tokens_owner_name_idx ON api_tokens (owner, name) WHERE revoked_at IS NULL;
CREATE INDEX api_tokens_owner_created_idx ON api_tokens (owner, created_at);

-- +goose Down
DROP TABLE api_tokens;
