-- Published events kept by id, so an event published again under its id reaches nothing new.
CREATE TABLE events (
    namespace  TEXT NOT NULL,
    id         TEXT NOT NULL,
    name       TEXT NOT NULL,
    -- How many runs it reached.
    delivered  INTEGER NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (namespace, id)
);

-- An event's delivery looks up the waits for it by name.
CREATE INDEX checkpoints_signal_waits ON checkpoints (name, run_id)
    WHERE kind = 'signal' AND status = 'pending';
