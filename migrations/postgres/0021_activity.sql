-- Load over time, for the dashboard's charts, per tenant and minute (minutes since the Unix
-- epoch), and per minute over every tenant under namespace '*' (not a valid namespace):
-- - `run_minutes`: runs started (`event` = 'started', in the minute of `created_at`) and runs
--   that reached each final status (in the minute of `finished_at`). Counted from the same
--   deltas as `run_totals` (which now carry their minute) and folded with them.
-- - `step_minutes`: step results recorded, by run-time `slot` (an index into
--   `model::LATENCY_BUCKETS`, the last slot past its last bound); each engine adds what it
--   recorded every few seconds.
-- Both are pruned after two days (`ACTIVITY_KEPT_MINUTES`); the charts show one.

CREATE TABLE run_minutes (
    namespace TEXT NOT NULL,
    minute    BIGINT NOT NULL,
    event     TEXT NOT NULL,
    n         BIGINT NOT NULL,
    PRIMARY KEY (namespace, minute, event)
);

CREATE TABLE step_minutes (
    namespace TEXT NOT NULL,
    minute    BIGINT NOT NULL,
    slot      SMALLINT NOT NULL,
    n         BIGINT NOT NULL,
    PRIMARY KEY (namespace, minute, slot)
);

-- Pruning deletes by minute alone.
CREATE INDEX run_minutes_minute ON run_minutes (minute);
CREATE INDEX step_minutes_minute ON step_minutes (minute);

-- Deltas written before this migration have no minute: they reach the totals only.
ALTER TABLE run_total_deltas ADD COLUMN minute BIGINT;

CREATE OR REPLACE FUNCTION runs_counted_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_count_deltas (namespace, workflow, status, n)
        SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, status, COUNT(*)
        FROM added GROUP BY 1, 2, 3;
    INSERT INTO run_total_deltas (namespace, workflow, event, minute, n)
        SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, 'started',
               created_at / 60000, COUNT(*)
        FROM added GROUP BY 1, 2, 4
        UNION ALL
        SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, status,
               COALESCE(finished_at, updated_at) / 60000, COUNT(*)
        FROM added WHERE run_status_is_final(status) GROUP BY 1, 2, 3, 4;
    INSERT INTO tag_count_deltas (namespace, tag, n)
        SELECT ns, t, COUNT(*) FROM (
            SELECT DISTINCT a.id, COALESCE(NULLIF(a.namespace, ''), 'default') AS ns, t
            FROM added a, jsonb_array_elements_text(a.tags) t
        ) x GROUP BY 1, 2;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION runs_counted_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_count_deltas (namespace, workflow, status, n) VALUES
        (COALESCE(NULLIF(OLD.namespace, ''), 'default'), OLD.workflow, OLD.status, -1),
        (COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, NEW.status, 1);
    IF run_status_is_final(NEW.status) THEN
        INSERT INTO run_total_deltas (namespace, workflow, event, minute, n) VALUES
            (COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, NEW.status,
             COALESCE(NEW.finished_at, NEW.updated_at) / 60000, 1);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION fold_run_counts() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('durable.fold_run_counts')) THEN
        RETURN FALSE;
    END IF;
    WITH d AS (DELETE FROM run_count_deltas RETURNING namespace, workflow, status, n)
    INSERT INTO run_counts (namespace, workflow, status, n)
        SELECT namespace, workflow, status, SUM(n) FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (namespace, workflow, status) DO UPDATE SET n = run_counts.n + EXCLUDED.n;
    DELETE FROM run_counts WHERE n = 0;
    WITH d AS (DELETE FROM tag_count_deltas RETURNING namespace, tag, n)
    INSERT INTO tag_counts (namespace, tag, n)
        SELECT namespace, tag, SUM(n) FROM d GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (namespace, tag) DO UPDATE SET n = tag_counts.n + EXCLUDED.n;
    DELETE FROM tag_counts WHERE n = 0;
    WITH d AS (DELETE FROM run_total_deltas RETURNING namespace, workflow, event, minute, n),
    totals AS (
        INSERT INTO run_totals (namespace, workflow, event, n)
            SELECT namespace, workflow, event, SUM(n) FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
            ON CONFLICT (namespace, workflow, event) DO UPDATE SET n = run_totals.n + EXCLUDED.n
    )
    INSERT INTO run_minutes (namespace, minute, event, n)
        SELECT namespace, minute, event, SUM(n) FROM d WHERE minute IS NOT NULL GROUP BY 1, 2, 3
        UNION ALL
        SELECT '*', minute, event, SUM(n) FROM d WHERE minute IS NOT NULL GROUP BY 2, 3
        ON CONFLICT (namespace, minute, event) DO UPDATE SET n = run_minutes.n + EXCLUDED.n;
    RETURN TRUE;
END $$;
