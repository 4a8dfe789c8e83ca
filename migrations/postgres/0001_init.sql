-- Runs, their checkpoints, signals, dashboard users and server settings (PostgreSQL).
-- Times are epoch milliseconds (BIGINT). JSON payloads are JSONB stored as the engine wrote them.
-- Semantically identical to migrations/sqlite: the same columns, statuses and rules.

CREATE TABLE runs (
    id                TEXT PRIMARY KEY,
    -- Never written empty; legacy NULL / '' rows read back as 'default'.
    namespace         TEXT,
    workflow          TEXT NOT NULL,
    workflow_version  INTEGER NOT NULL,
    status            TEXT NOT NULL,
    input             JSONB NOT NULL,
    output            JSONB,
    error             JSONB,
    tags              JSONB NOT NULL DEFAULT '[]',
    search_attributes JSONB NOT NULL DEFAULT '{}',
    parent_run_id     TEXT,
    root_run_id       TEXT NOT NULL,
    nesting_depth     INTEGER NOT NULL DEFAULT 0,
    retry_of          TEXT,
    continued_from    TEXT,
    -- How many times the run was claimed for a turn (the sticky fast path's version).
    attempt           INTEGER NOT NULL DEFAULT 0,
    wake_at           BIGINT,
    -- Set when a result or signal lands while a turn is running, so that turn's outcome wakes
    -- the run.
    needs_wake        BOOLEAN NOT NULL DEFAULT FALSE,
    -- How many times an expired lease was taken over.
    recoveries        INTEGER NOT NULL DEFAULT 0,
    locked_by         TEXT,
    locked_until      BIGINT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    finished_at       BIGINT
);

-- Dashboard list: a tenant's runs newest first, optionally by status or workflow (keyset).
CREATE INDEX runs_ns_created ON runs (namespace, created_at DESC, id DESC);
CREATE INDEX runs_ns_status_created ON runs (namespace, status, created_at DESC, id DESC);
CREATE INDEX runs_ns_workflow_created ON runs (namespace, workflow, created_at DESC, id DESC);
-- Operator list across namespaces, optionally by status or workflow.
CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
CREATE INDEX runs_status_created ON runs (status, created_at DESC, id DESC);
CREATE INDEX runs_workflow_created ON runs (workflow, created_at DESC, id DESC);
-- Tags and search attributes (containment filters).
CREATE INDEX runs_tags ON runs USING GIN (tags jsonb_path_ops);
CREATE INDEX runs_search_attributes ON runs USING GIN (search_attributes jsonb_path_ops);
-- Driver scans: runnable runs (pending, due), expired leases; kept small by the predicate.
CREATE INDEX runs_drivable ON runs (status, wake_at)
    WHERE status IN ('pending', 'suspended', 'running', 'cancelling');
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

CREATE TABLE checkpoints (
    run_id       TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    name         TEXT NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    worker_group TEXT,
    input        JSONB,
    output       JSONB,
    error        JSONB,
    wake_at      BIGINT,
    enqueued_at  BIGINT,
    started_at   BIGINT,
    finished_at  BIGINT,
    -- How a failed remote step is retried (RetryPolicy); NULL = never.
    retry_policy JSONB,
    -- How long one try of a remote step may take, in milliseconds; NULL = no limit.
    timeout_ms   BIGINT,
    PRIMARY KEY (run_id, seq)
);

-- Redispatch scan: remote steps still waiting for a result.
CREATE INDEX checkpoints_pending_remote ON checkpoints (enqueued_at)
    WHERE status = 'pending' AND kind = 'remote_step';

-- Signals sent to runs. A signal that arrives before the run waits for it stays here, buffered,
-- until a wait of that name consumes it (consumed_seq = the wait's position). Never lost.
CREATE TABLE signals (
    id           BIGSERIAL PRIMARY KEY,
    run_id       TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    payload      JSONB NOT NULL,
    consumed_seq INTEGER,
    created_at   BIGINT NOT NULL
);

CREATE INDEX signals_buffered ON signals (run_id, id) WHERE consumed_seq IS NULL;

CREATE TABLE users (
    id            BIGSERIAL PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    -- NULL for operators, who see every namespace.
    tenant        TEXT,
    role          TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    created_at    BIGINT NOT NULL
);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
