-- Operators' shared pools, and the tenants each is granted to (a grant bumps the tenant's
-- definitions version in the same write).
CREATE TABLE shared_pools (
    name TEXT PRIMARY KEY,
    labels TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE pool_grants (
    pool TEXT NOT NULL REFERENCES shared_pools (name),
    namespace TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    PRIMARY KEY (pool, namespace)
) WITHOUT ROWID;

CREATE INDEX pool_grants_by_tenant ON pool_grants (namespace, pool);
