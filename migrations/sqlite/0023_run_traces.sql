-- The W3C trace context a run's trace continues (its start request's, or for a child the
-- turn that started it): every turn, step and signal of the run joins that trace. NULL when
-- tracing was off at the start.
ALTER TABLE runs ADD COLUMN traceparent TEXT;
