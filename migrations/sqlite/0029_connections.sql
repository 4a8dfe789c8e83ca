-- A tenant's connections (readable fields, when each secret was set, the secrets sealed under
-- the tenant's data key) and each tenant's data key, wrapped by a master key whose id is kept.
CREATE TABLE connections (
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    base_url TEXT,
    headers TEXT NOT NULL DEFAULT '{}',
    secret_set_at TEXT NOT NULL DEFAULT '{}',
    sealed BLOB NOT NULL,
    revision INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

CREATE TABLE tenant_keys (
    namespace TEXT PRIMARY KEY,
    master_key_id TEXT NOT NULL,
    wrapped BLOB NOT NULL
) WITHOUT ROWID;
