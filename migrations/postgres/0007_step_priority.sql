-- A remote step's priority among its step's waiting tasks (the wire's `priority`), kept with the
-- step so a dispatch sent again (a lost one, or after a restart) keeps its place.
ALTER TABLE checkpoints ADD COLUMN priority BIGINT;
