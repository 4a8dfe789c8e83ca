-- Driver liveness, so a starting control plane sends again only the remote steps of drivers
-- that are gone. With a transport that keeps tasks in its sender's memory (the in-process one),
-- a step a live peer sent is still queued there; sending it again would run it twice.

-- The driver that last sent a waiting remote step; NULL = unknown, treated as gone.
ALTER TABLE checkpoints ADD COLUMN dispatched_by TEXT;

-- Each driver's heartbeat: alive until `alive_until` (epoch ms). No row = gone.
CREATE TABLE drivers (
    owner       TEXT PRIMARY KEY,
    alive_until INTEGER NOT NULL
);
