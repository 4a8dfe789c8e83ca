-- Updates: a signal an update handler accepted keeps the update's id and the handler's reply,
-- so a caller repeating the update gets that reply and the run receives it once.
ALTER TABLE signals ADD COLUMN update_id TEXT;
ALTER TABLE signals ADD COLUMN reply TEXT;

CREATE UNIQUE INDEX signals_updates ON signals (run_id, update_id) WHERE update_id IS NOT NULL;
