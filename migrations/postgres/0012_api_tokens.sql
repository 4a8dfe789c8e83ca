-- API tokens: looked up by their public id at every request, so a revocation reaches every
-- process at once. Only a hash of the secret is kept. `tenant` is NULL for an operator token.
CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY,
    tenant      TEXT,
    name        TEXT NOT NULL,
    scope       TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX api_tokens_tenant ON api_tokens (tenant, created_at);
