-- The child tree and the run-id filter read a run's family by its root.
CREATE INDEX runs_root ON runs (root_run_id, created_at DESC, id DESC);
-- The operator's "failed in the last hour" reads recent endings by status.
CREATE INDEX runs_status_finished ON runs (status, finished_at) WHERE finished_at IS NOT NULL;

-- "Log out everywhere" bumps the epoch; a session remembers the epoch it logged in at and
-- stops working once it differs.
ALTER TABLE users ADD COLUMN session_epoch INTEGER NOT NULL DEFAULT 0;

-- Failed logins, by key (`email:<address>` or `ip:<address>`), for login rate limiting shared
-- by every dashboard process on this database.
CREATE TABLE login_failures (
    key TEXT NOT NULL,
    at  INTEGER NOT NULL
);
CREATE INDEX login_failures_key_at ON login_failures (key, at);
