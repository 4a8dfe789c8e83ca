-- A tenant's routing rules: one ordered list, first match wins, a catch-all last. Edits bump
-- the tenant's definitions version in the same write.
CREATE TABLE routing_rules (
    namespace TEXT PRIMARY KEY,
    rules TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
