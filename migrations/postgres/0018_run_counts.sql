-- Counts kept with the runs, so nothing that shows them scans runs:
-- - `run_counts`: runs now, by tenant, workflow and status (the facets, the operator's load,
--   the `durable_runs` gauges);
-- - `tag_counts`: runs now, by tenant and tag (a run counts once per tag);
-- - `run_totals`: runs ever started (`event` = 'started') and ever finished in each final
--   status, by tenant and workflow (the `durable_runs_started_total` and
--   `durable_runs_finished_total` counters); never decreased, not even by a deletion.
-- Triggers keep them in the transaction of every change, whatever statement makes it.
--
-- Many control planes change runs at once, so a change never updates a shared row: it appends
-- its delta (no index, no lock to wait for) and `fold_run_counts()` (each engine calls it every
-- second; one folds at a time) moves the deltas into the totals. A read sums totals and deltas
-- in one snapshot, so it is exact whenever it runs.

CREATE TABLE run_counts (
    namespace TEXT NOT NULL,
    workflow  TEXT NOT NULL,
    status    TEXT NOT NULL,
    n         BIGINT NOT NULL,
    PRIMARY KEY (namespace, workflow, status)
);
CREATE TABLE run_count_deltas (LIKE run_counts);

CREATE TABLE tag_counts (
    namespace TEXT NOT NULL,
    tag       TEXT NOT NULL,
    n         BIGINT NOT NULL,
    PRIMARY KEY (namespace, tag)
);
CREATE TABLE tag_count_deltas (LIKE tag_counts);

CREATE TABLE run_totals (
    namespace TEXT NOT NULL,
    workflow  TEXT NOT NULL,
    event     TEXT NOT NULL,
    n         BIGINT NOT NULL,
    PRIMARY KEY (namespace, workflow, event)
);
CREATE TABLE run_total_deltas (LIKE run_totals);

-- The statuses a run ends in (`RunStatus::is_terminal`).
CREATE FUNCTION run_status_is_final(status TEXT) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT status IN ('completed', 'failed', 'cancelled', 'dead', 'continued', 'compensated',
                      'compensation_failed')
$$;

-- Inserted runs, a statement at a time (a batch of starts is one statement).
CREATE FUNCTION runs_counted_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_count_deltas (namespace, workflow, status, n)
        SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, status, COUNT(*)
        FROM added GROUP BY 1, 2, 3;
    INSERT INTO run_total_deltas (namespace, workflow, event, n)
        SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, 'started', COUNT(*)
        FROM added GROUP BY 1, 2
        UNION ALL
        SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, status, COUNT(*)
        FROM added WHERE run_status_is_final(status) GROUP BY 1, 2, 3;
    INSERT INTO tag_count_deltas (namespace, tag, n)
        SELECT ns, t, COUNT(*) FROM (
            SELECT DISTINCT a.id, COALESCE(NULLIF(a.namespace, ''), 'default') AS ns, t
            FROM added a, jsonb_array_elements_text(a.tags) t
        ) x GROUP BY 1, 2;
    RETURN NULL;
END $$;

CREATE FUNCTION runs_counted_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_count_deltas (namespace, workflow, status, n)
        SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, status, -COUNT(*)
        FROM removed GROUP BY 1, 2, 3;
    INSERT INTO tag_count_deltas (namespace, tag, n)
        SELECT ns, t, -COUNT(*) FROM (
            SELECT DISTINCT r.id, COALESCE(NULLIF(r.namespace, ''), 'default') AS ns, t
            FROM removed r, jsonb_array_elements_text(r.tags) t
        ) x GROUP BY 1, 2;
    RETURN NULL;
END $$;

-- A status change, a row at a time: the WHEN clause keeps every other update of a run (leases,
-- wake times) from calling it.
CREATE FUNCTION runs_counted_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_count_deltas (namespace, workflow, status, n) VALUES
        (COALESCE(NULLIF(OLD.namespace, ''), 'default'), OLD.workflow, OLD.status, -1),
        (COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, NEW.status, 1);
    IF run_status_is_final(NEW.status) THEN
        INSERT INTO run_total_deltas (namespace, workflow, event, n) VALUES
            (COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, NEW.status, 1);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_counted_insert AFTER INSERT ON runs
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION runs_counted_insert();
CREATE TRIGGER runs_counted_delete AFTER DELETE ON runs
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION runs_counted_delete();
CREATE TRIGGER runs_counted_status AFTER UPDATE OF status ON runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION runs_counted_status();

-- Folds the deltas into the totals; `false` when another session is folding now. Counts of
-- runs now that reach zero are removed, so a facet lists only what exists.
CREATE FUNCTION fold_run_counts() RETURNS boolean LANGUAGE plpgsql AS $$
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
    WITH d AS (DELETE FROM run_total_deltas RETURNING namespace, workflow, event, n)
    INSERT INTO run_totals (namespace, workflow, event, n)
        SELECT namespace, workflow, event, SUM(n) FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (namespace, workflow, event) DO UPDATE SET n = run_totals.n + EXCLUDED.n;
    RETURN TRUE;
END $$;

-- What exists now. Finished runs already deleted are not known, so the totals start from the
-- runs kept.
INSERT INTO run_counts (namespace, workflow, status, n)
    SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, status, COUNT(*)
    FROM runs GROUP BY 1, 2, 3;
INSERT INTO tag_counts (namespace, tag, n)
    SELECT ns, t, COUNT(*) FROM (
        SELECT DISTINCT r.id, COALESCE(NULLIF(r.namespace, ''), 'default') AS ns, t
        FROM runs r, jsonb_array_elements_text(r.tags) t
    ) x GROUP BY 1, 2;
INSERT INTO run_totals (namespace, workflow, event, n)
    SELECT namespace, workflow, 'started', SUM(n) FROM run_counts GROUP BY 1, 2
    UNION ALL
    SELECT namespace, workflow, status, n FROM run_counts WHERE run_status_is_final(status);
