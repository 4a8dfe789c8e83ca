-- The login attempt a failure row was reserved for: a login reserves its failure under each key
-- before the password is checked (so parallel attempts cannot all pass the count), and takes
-- the rows back by this id when the password was right.
ALTER TABLE login_failures ADD COLUMN attempt TEXT;
CREATE INDEX login_failures_attempt ON login_failures (attempt) WHERE attempt IS NOT NULL;
