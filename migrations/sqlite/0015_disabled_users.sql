-- An operator disables an account (`durable user disable`): it cannot log in, and its
-- sessions end (the session epoch moves on with every change of the account).
ALTER TABLE users ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
