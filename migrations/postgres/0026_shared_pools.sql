-- Operators' shared pools, and the tenants each is granted to (a grant bumps the tenant's
-- definitions version in the same transaction).
CREATE TABLE shared_pools (
    name TEXT PRIMARY KEY,
    labels JSONB NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE pool_grants (
    pool TEXT NOT NULL REFERENCES shared_pools (name),
    namespace TEXT NOT NULL,
    granted_at BIGINT NOT NULL,
    PRIMARY KEY (pool, namespace)
);

CREATE INDEX pool_grants_by_tenant ON pool_grants (namespace, pool);
