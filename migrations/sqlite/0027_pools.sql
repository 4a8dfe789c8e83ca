-- A tenant's worker pools (a partition `<tenant>.<name>` its workers serve, with labels), and
-- the version of each tenant's routing definitions, bumped by every edit of them in the edit's
-- own write.
CREATE TABLE pools (
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    labels TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

CREATE TABLE definition_versions (
    namespace TEXT PRIMARY KEY,
    version INTEGER NOT NULL
) WITHOUT ROWID;
