-- The run's `attempt` when it was last admitted: 0 when it was created, its attempt then when
-- it was retried. A top-level run is fresh (queued, held back by its tenant's concurrency
-- ceiling and its workflow's concurrency limit) while `attempt` equals it, and started once a
-- claim moved `attempt` past it; `attempt` itself only grows, so a turn's claim stays a fence.
ALTER TABLE runs ADD COLUMN admitted_attempt INTEGER NOT NULL DEFAULT 0;
-- The started keyed runs, as the concurrency limit counts them now.
DROP INDEX runs_concurrency;
CREATE INDEX runs_concurrency ON runs (namespace, workflow, concurrency_key, status)
    WHERE concurrency_key IS NOT NULL AND attempt > admitted_attempt;
