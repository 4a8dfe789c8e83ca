-- Counts kept with the runs, so nothing that shows them scans runs:
-- - `run_counts`: runs now, by tenant, workflow and status (the facets, the operator's load,
--   the `durable_runs` gauges);
-- - `tag_counts`: runs now, by tenant and tag (a run counts once per tag);
-- - `run_totals`: runs ever started (`event` = 'started') and ever finished in each final
--   status, by tenant and workflow (the `durable_runs_started_total` and
--   `durable_runs_finished_total` counters); never decreased, not even by a deletion.
-- Triggers keep them in the transaction of every change, whatever statement makes it. SQLite
-- has one writer, so the totals are updated in place (PostgreSQL appends deltas instead).

CREATE TABLE run_counts (
    namespace TEXT NOT NULL,
    workflow  TEXT NOT NULL,
    status    TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (namespace, workflow, status)
) WITHOUT ROWID;

CREATE TABLE tag_counts (
    namespace TEXT NOT NULL,
    tag       TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (namespace, tag)
) WITHOUT ROWID;

CREATE TABLE run_totals (
    namespace TEXT NOT NULL,
    workflow  TEXT NOT NULL,
    event     TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (namespace, workflow, event)
) WITHOUT ROWID;

CREATE TRIGGER runs_counted_insert AFTER INSERT ON runs BEGIN
    INSERT INTO run_counts (namespace, workflow, status, n)
        VALUES (COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, NEW.status, 1)
        ON CONFLICT (namespace, workflow, status) DO UPDATE SET n = n + 1;
    INSERT INTO run_totals (namespace, workflow, event, n)
        VALUES (COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, 'started', 1)
        ON CONFLICT (namespace, workflow, event) DO UPDATE SET n = n + 1;
    INSERT INTO run_totals (namespace, workflow, event, n)
        SELECT COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, NEW.status, 1
        WHERE NEW.status IN ('completed', 'failed', 'cancelled', 'dead', 'continued',
                             'compensated', 'compensation_failed')
        ON CONFLICT (namespace, workflow, event) DO UPDATE SET n = n + 1;
    INSERT INTO tag_counts (namespace, tag, n)
        SELECT DISTINCT COALESCE(NULLIF(NEW.namespace, ''), 'default'), t.value, 1
        FROM json_each(NEW.tags) t WHERE t.type = 'text'
        ON CONFLICT (namespace, tag) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER runs_counted_delete AFTER DELETE ON runs BEGIN
    UPDATE run_counts SET n = n - 1
        WHERE namespace = COALESCE(NULLIF(OLD.namespace, ''), 'default')
        AND workflow = OLD.workflow AND status = OLD.status;
    DELETE FROM run_counts
        WHERE namespace = COALESCE(NULLIF(OLD.namespace, ''), 'default')
        AND workflow = OLD.workflow AND status = OLD.status AND n = 0;
    UPDATE tag_counts SET n = n - 1
        WHERE namespace = COALESCE(NULLIF(OLD.namespace, ''), 'default')
        AND tag IN (SELECT t.value FROM json_each(OLD.tags) t WHERE t.type = 'text');
    DELETE FROM tag_counts
        WHERE namespace = COALESCE(NULLIF(OLD.namespace, ''), 'default') AND n = 0;
END;

CREATE TRIGGER runs_counted_status AFTER UPDATE OF status ON runs
    WHEN OLD.status IS NOT NEW.status BEGIN
    UPDATE run_counts SET n = n - 1
        WHERE namespace = COALESCE(NULLIF(OLD.namespace, ''), 'default')
        AND workflow = OLD.workflow AND status = OLD.status;
    DELETE FROM run_counts
        WHERE namespace = COALESCE(NULLIF(OLD.namespace, ''), 'default')
        AND workflow = OLD.workflow AND status = OLD.status AND n = 0;
    INSERT INTO run_counts (namespace, workflow, status, n)
        VALUES (COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, NEW.status, 1)
        ON CONFLICT (namespace, workflow, status) DO UPDATE SET n = n + 1;
    INSERT INTO run_totals (namespace, workflow, event, n)
        SELECT COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.workflow, NEW.status, 1
        WHERE NEW.status IN ('completed', 'failed', 'cancelled', 'dead', 'continued',
                             'compensated', 'compensation_failed')
        ON CONFLICT (namespace, workflow, event) DO UPDATE SET n = n + 1;
END;

-- What exists now. Finished runs already deleted are not known, so the totals start from the
-- runs kept.
INSERT INTO run_counts (namespace, workflow, status, n)
    SELECT COALESCE(NULLIF(namespace, ''), 'default'), workflow, status, COUNT(*)
    FROM runs GROUP BY 1, 2, 3;
INSERT INTO tag_counts (namespace, tag, n)
    SELECT ns, tag, COUNT(*) FROM (
        SELECT DISTINCT r.id, COALESCE(NULLIF(r.namespace, ''), 'default') AS ns, t.value AS tag
        FROM runs r, json_each(r.tags) t WHERE t.type = 'text'
    ) GROUP BY 1, 2;
INSERT INTO run_totals (namespace, workflow, event, n)
    SELECT namespace, workflow, 'started', SUM(n) FROM run_counts GROUP BY 1, 2;
INSERT INTO run_totals (namespace, workflow, event, n)
    SELECT namespace, workflow, status, n FROM run_counts
    WHERE status IN ('completed', 'failed', 'cancelled', 'dead', 'continued', 'compensated',
                     'compensation_failed');
