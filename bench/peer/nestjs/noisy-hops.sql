-- Where each B run's time went (run it right after a-with-b, before the next reset):
-- created -> first step enqueued (engine's turn for the new run), then per step: enqueued -> worker
-- picked it up (started_at, the worker's own clock, carried in the result) -> engine recorded the
-- result (finished_at: the engine's clock when it consumed the result from the shared results queue), in ms.
SELECT r.id,
       c.seq,
       c.worker_group,
       round(extract(epoch FROM (c.enqueued_at - coalesce(lag(c.finished_at) OVER w, r.created_at))) * 1000) AS to_enqueue_ms,
       round(extract(epoch FROM (c.started_at - c.enqueued_at)) * 1000) AS queue_to_worker_ms,
       round(extract(epoch FROM (c.finished_at - c.started_at)) * 1000) AS worker_to_result_recorded_ms
FROM durable_workflow_runs r
JOIN durable_step_checkpoints c ON c.run_id = r.id
WHERE r.namespace = 'tenantB' AND r.id LIKE 'b-%'
WINDOW w AS (PARTITION BY r.id ORDER BY c.seq)
ORDER BY r.created_at, c.seq;
