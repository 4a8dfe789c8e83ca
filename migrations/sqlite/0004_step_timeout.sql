-- How long one try of a remote step may take, in milliseconds; NULL = no limit.
ALTER TABLE checkpoints ADD COLUMN timeout_ms INTEGER;
