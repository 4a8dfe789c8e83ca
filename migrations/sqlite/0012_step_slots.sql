-- The concurrency slots a remote step's dispatch holds (its counter, `steps:<step>:<key>`), kept
-- with the step: its result gives the slot back, and the sweep renews the slot's lease while the
-- dispatch is out. The index holds only dispatches out now, which is what the sweep reads.
ALTER TABLE checkpoints ADD COLUMN slot TEXT;
CREATE INDEX checkpoints_slots_out ON checkpoints (run_id, seq)
    WHERE slot IS NOT NULL AND status IN ('pending', 'running') AND enqueued_at IS NOT NULL;
