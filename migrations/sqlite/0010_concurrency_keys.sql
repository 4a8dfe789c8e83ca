-- A workflow's concurrency limit as each run holds it (SPEC §8, flow control): the key its
-- input gave (empty for a workflow-wide limit) and the limit in force when it started. A fresh
-- run starts only while fewer than `concurrency_limit` runs of its tenant, workflow and key are
-- started and not ended; the index holds only started keyed runs, so counting a key's costs its
-- started runs, however many wait queued behind them.
ALTER TABLE runs ADD COLUMN concurrency_key TEXT;
ALTER TABLE runs ADD COLUMN concurrency_limit INTEGER;
CREATE INDEX runs_concurrency ON runs (namespace, workflow, concurrency_key, status)
    WHERE concurrency_key IS NOT NULL AND attempt > 0;
