-- Where a cluster burst's time goes, per hop, from the timestamps the store keeps (ms).
-- After `cluster`, on its database (the newest durable_t_% one; kept ten minutes):
--   psql -d durable_t_… -v n=2000 -f bench/cluster_hops.sql
-- After `DURABLE_BENCH_CLUSTER=1 noisy`, globex's runs on its last database:
--   psql -d durable_t_… -v n=100000 -v runs="namespace = 'globex'" -f bench/cluster_hops.sql
-- A step's finished_at is when the control plane recorded its result, so "worker exec"
-- includes the result's trip back; "sent" is when the turn that sent it was computed, so
-- "sent->worker start" includes that turn's commit and the task's queue.
\if :{?runs}
\else
  \set runs 'workflow = ''demo.order'''
\endif
WITH r AS (
  SELECT id, created_at, finished_at FROM runs WHERE :runs
  ORDER BY created_at DESC LIMIT :n
), c AS (
  SELECT c.run_id, c.seq, c.enqueued_at, c.started_at, c.finished_at,
         COALESCE(LAG(c.finished_at) OVER (PARTITION BY c.run_id ORDER BY c.seq), r.created_at) AS ready
  FROM checkpoints c JOIN r ON r.id = c.run_id WHERE c.kind = 'remote_step'
), hops AS (
  SELECT 'step' || seq || ' ready->sent (result in, turn)' AS hop, enqueued_at - ready AS ms FROM c
  UNION ALL SELECT 'step' || seq || ' sent->worker start (commit, queue)', started_at - enqueued_at FROM c
  UNION ALL SELECT 'step' || seq || ' worker exec', finished_at - started_at FROM c
  UNION ALL SELECT 'last step end->run finished', r.finished_at - c.finished_at FROM c JOIN r ON r.id = c.run_id WHERE c.seq = 2
  UNION ALL SELECT 'run total', finished_at - created_at FROM r
)
SELECT hop,
  percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
  percentile_disc(0.9) WITHIN GROUP (ORDER BY ms) AS p90,
  percentile_disc(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
  round(avg(ms), 1) AS mean, count(*)
FROM hops GROUP BY hop ORDER BY hop;
SELECT (max(finished_at) - min(created_at)) AS burst_ms, count(*) FROM (SELECT * FROM runs WHERE :runs ORDER BY created_at DESC LIMIT :n) x;
