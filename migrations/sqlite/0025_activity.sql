-- Load over time, for the dashboard's charts, per tenant and minute (minutes since the Unix
-- epoch), and per minute over every tenant under namespace '*' (not a valid namespace):
-- - `run_minutes`: runs started (`event` = 'started', in the minute of `created_at`) and runs
--   that reached each final status (in the minute of `finished_at`), kept by the triggers below
--   in the transaction of every change.
-- - `step_minutes`: step results recorded, by run-time `slot` (an index into
--   `model::LATENCY_BUCKETS`, the last slot past its last bound); the engine adds what it
--   recorded every few seconds.
-- Both are pruned after two days (`ACTIVITY_KEPT_MINUTES`); the charts show one.

CREATE TABLE run_minutes (
    namespace TEXT NOT NULL,
    minute    INTEGER NOT NULL,
    event     TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (namespace, minute, event)
) WITHOUT ROWID;

CREATE TABLE step_minutes (
    namespace TEXT NOT NULL,
    minute    INTEGER NOT NULL,
    slot      INTEGER NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (namespace, minute, slot)
) WITHOUT ROWID;

-- Pruning deletes by minute alone.
CREATE INDEX run_minutes_minute ON run_minutes (minute);
CREATE INDEX step_minutes_minute ON step_minutes (minute);

CREATE TRIGGER run_minutes_insert AFTER INSERT ON runs BEGIN
    INSERT INTO run_minutes (namespace, minute, event, n)
        VALUES (COALESCE(NULLIF(NEW.namespace, ''), 'default'), NEW.created_at / 60000, 'started', 1),
               ('*', NEW.created_at / 60000, 'started', 1)
        ON CONFLICT (namespace, minute, event) DO UPDATE SET n = n + 1;
    INSERT INTO run_minutes (namespace, minute, event, n)
        SELECT k.ns, COALESCE(NEW.finished_at, NEW.updated_at) / 60000, NEW.status, 1
        FROM (SELECT COALESCE(NULLIF(NEW.namespace, ''), 'default') AS ns UNION ALL SELECT '*') k
        WHERE NEW.status IN ('completed', 'failed', 'cancelled', 'dead', 'continued',
                             'compensated', 'compensation_failed')
        ON CONFLICT (namespace, minute, event) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER run_minutes_status AFTER UPDATE OF status ON runs
    WHEN OLD.status IS NOT NEW.status
    AND NEW.status IN ('completed', 'failed', 'cancelled', 'dead', 'continued', 'compensated',
                       'compensation_failed') BEGIN
    INSERT INTO run_minutes (namespace, minute, event, n)
        VALUES (COALESCE(NULLIF(NEW.namespace, ''), 'default'),
                COALESCE(NEW.finished_at, NEW.updated_at) / 60000, NEW.status, 1),
               ('*', COALESCE(NEW.finished_at, NEW.updated_at) / 60000, NEW.status, 1)
        ON CONFLICT (namespace, minute, event) DO UPDATE SET n = n + 1;
END;
