-- Routing: where a remote step or turn was sent and what decided it (`{"pool", "by", "rule", "version", "instead_of"}`).
ALTER TABLE checkpoints ADD COLUMN route TEXT;
