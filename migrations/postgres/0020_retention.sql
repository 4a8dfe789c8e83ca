-- Retention looks for a tenant's run families whose root ended before a cut: by tenant and end,
-- roots only, so a round reads what may be due, not every finished run.
CREATE INDEX runs_roots_finished ON runs (namespace, finished_at)
    WHERE parent_run_id IS NULL AND id = root_run_id AND finished_at IS NOT NULL;
