-- A tenant's routing rules: one ordered list, first match wins, a catch-all last. Edits bump
-- the tenant's definitions version in the same transaction.
CREATE TABLE routing_rules (
    namespace TEXT PRIMARY KEY,
    rules JSONB NOT NULL,
    updated_at BIGINT NOT NULL
);
