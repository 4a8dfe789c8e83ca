-- A run's timeout: past this time the run fails (code `run_timeout`) wherever it waits.
ALTER TABLE runs ADD COLUMN deadline_at BIGINT;
