-- Tenants' plans: ceilings and a fair-share weight (SPEC §8). `tenant` is a tenant name, or
-- `*` for the default plan every tenant's unset fields fall back to. `plan` is its JSON.
CREATE TABLE plans (
    tenant     TEXT PRIMARY KEY,
    plan       JSONB NOT NULL,
    updated_at BIGINT NOT NULL
);

