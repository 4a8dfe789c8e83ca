-- Runs, their checkpoints, dashboard users and server settings (SQLite).
-- Times are epoch milliseconds. JSON payloads are stored as TEXT.

CREATE TABLE runs (
    id                TEXT PRIMARY KEY NOT NULL,
    -- Never written empty; legacy NULL / '' rows read back as 'default'.
    namespace         TEXT,
    workflow          TEXT NOT NULL,
    workflow_version  INTEGER NOT NULL,
    status            TEXT NOT NULL,
    input             TEXT NOT NULL,
    output            TEXT,
    error             TEXT,
    tags              TEXT NOT NULL DEFAULT '[]',
    search_attributes TEXT NOT NULL DEFAULT '{}',
    parent_run_id     TEXT,
    root_run_id       TEXT NOT NULL,
    nesting_depth     INTEGER NOT NULL DEFAULT 0,
    retry_of          TEXT,
    continued_from    TEXT,
    attempt           INTEGER NOT NULL DEFAULT 0,
    wake_at           INTEGER,
    -- Set when a result lands while a turn is running, so that turn's outcome wakes the run.
    needs_wake        INTEGER NOT NULL DEFAULT 0,
    -- How many times an expired lease was taken over.
    recoveries        INTEGER NOT NULL DEFAULT 0,
    locked_by         TEXT,
    locked_until      INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    finished_at       INTEGER
);

-- Dashboard list: a tenant's runs newest first, optionally by status or workflow.
CREATE INDEX runs_ns_created ON runs (namespace, created_at DESC, id DESC);
CREATE INDEX runs_ns_status_created ON runs (namespace, status, created_at DESC, id DESC);
CREATE INDEX runs_ns_workflow_created ON runs (namespace, workflow, created_at DESC, id DESC);
-- Operator list across namespaces.
CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
-- Driver scans: runnable runs and expired leases.
CREATE INDEX runs_status_wake ON runs (status, wake_at);
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

CREATE TABLE checkpoints (
    run_id       TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    name         TEXT NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    worker_group TEXT,
    input        TEXT,
    output       TEXT,
    error        TEXT,
    wake_at      INTEGER,
    enqueued_at  INTEGER,
    started_at   INTEGER,
    finished_at  INTEGER,
    PRIMARY KEY (run_id, seq)
);

-- Redispatch scan: remote steps still waiting for a result.
CREATE INDEX checkpoints_pending_remote ON checkpoints (status, kind, enqueued_at)
    WHERE status IN ('pending', 'running');

CREATE TABLE users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    email         TEXT NOT NULL UNIQUE,
    -- NULL for operators, who see every namespace.
    tenant        TEXT,
    role          TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    created_at    INTEGER NOT NULL
);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
