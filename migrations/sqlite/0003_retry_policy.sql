-- How a failed remote step is retried (JSON RetryPolicy); NULL = never.
ALTER TABLE checkpoints ADD COLUMN retry_policy TEXT;
