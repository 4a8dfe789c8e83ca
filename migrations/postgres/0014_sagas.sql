-- Sagas: what undoes a step (`{"undo": {"step", "input"}}`), or which step a compensation
-- undoes (`{"undoes": seq}`).
ALTER TABLE checkpoints ADD COLUMN saga JSONB;
