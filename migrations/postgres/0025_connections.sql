-- A tenant's connections (readable fields, when each secret was set, the secrets sealed under
-- the tenant's data key) and each tenant's data key, wrapped by a master key whose id is kept.
CREATE TABLE connections (
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    base_url TEXT,
    headers JSONB NOT NULL DEFAULT '{}',
    secret_set_at JSONB NOT NULL DEFAULT '{}',
    sealed BYTEA NOT NULL,
    revision BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (namespace, name)
);

CREATE TABLE tenant_keys (
    namespace TEXT PRIMARY KEY,
    master_key_id TEXT NOT NULL,
    wrapped BYTEA NOT NULL
);
