-- Signals sent to runs. A signal that arrives before the run waits for it stays here, buffered,
-- until a wait of that name consumes it (consumed_seq = the wait's position). Never lost.
CREATE TABLE signals (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    consumed_seq INTEGER,
    created_at   INTEGER NOT NULL
);

CREATE INDEX signals_buffered ON signals (run_id, name, id) WHERE consumed_seq IS NULL;
