-- A tenant's worker pools (a partition `<tenant>.<name>` its workers serve, with labels), and
-- the version of each tenant's routing definitions, bumped by every edit of them in the edit's
-- own transaction.
CREATE TABLE pools (
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    labels JSONB NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (namespace, name)
);

CREATE TABLE definition_versions (
    namespace TEXT PRIMARY KEY,
    version BIGINT NOT NULL
);
