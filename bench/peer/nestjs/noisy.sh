#!/usr/bin/env bash
# Noisy-neighbour driver for nestjs-durable (peer engine). Run from a scratch copy of the anchor
# harness (shared/anchors/nestjs-durable) with these files dropped in (src/noisy-*.ts, noisy.sh,
# noisy-summarize.js), after `npm ci && npx tsc -p .`.
#
# usage: ./noisy.sh [all|b-alone|a-alone|a-with-b] [reps]
#   env: NOISY_NA (A runs, default 2000), NOISY_NB (B runs, default 20), NOISY_WORKFLOWS (50),
#        NOISY_STEPS (per-workflow|shared), WORKER_CONCURRENCY (50 per queue), B_AFTER (starts|<ms>),
#        PG_PORT / PG_DB / REDIS_PORT (a PRIVATE redis: this script FLUSHALLs it)
# Each repetition of each mode uses FRESH engine + 2 tenant-worker processes, on emptied durable_*
# tables and a FLUSHALL'd Redis. Order per rep: b-alone, a-alone, a-with-b.
set -uo pipefail
A=${ANCHOR_DIR:?set ANCHOR_DIR to a scratch copy of the harness}
cd $A
WHAT=${1:-all}
REPS=${2:-1}
export NOISY_NA=${NOISY_NA:-2000}
export NOISY_NB=${NOISY_NB:-20}
export WORKER_CONCURRENCY=${WORKER_CONCURRENCY:-50}
export PG_PORT=${PG_PORT:-5432}
export PG_DB=${PG_DB:-anchor_noisy}
export REDIS_PORT=${REDIS_PORT:-56379}
[[ $REDIS_PORT == 6379 ]] && { echo "refusing to FLUSHALL the shared redis on 6379"; exit 2; }
STAMP=$(date +%Y%m%d-%H%M%S)
R=$A/results/noisy-$STAMP; mkdir -p $R
PSQL="psql -h 127.0.0.1 -p $PG_PORT -U postgres -d $PG_DB -q"

reset_state() {
  redis-cli -p $REDIS_PORT flushall >/dev/null
  $PSQL -c "DO \$\$ DECLARE t text; BEGIN FOR t IN SELECT tablename FROM pg_tables WHERE schemaname='public' AND tablename LIKE 'durable_%' LOOP EXECUTE 'TRUNCATE ' || quote_ident(t); END LOOP; END \$\$;" >/dev/null
  $PSQL -c "VACUUM ANALYZE" >/dev/null 2>&1 || true
}
others_cpu() { echo "loadavg: $(cat /proc/loadavg)"; ps -eo pcpu,comm --sort=-pcpu | head -6 | tr '\n' ';'; echo; }
GATE_WAIT=${GATE_WAIT:-300}
gate() { echo "[gate] $(python3 $A/cpusampler.py gate $$ $GATE_WAIT 15)"; }
watch_start() { python3 $A/cpusampler.py watch $$ "$1" & WATCH_PID=$!; }
watch_stop() { kill $WATCH_PID 2>/dev/null; wait $WATCH_PID 2>/dev/null; }

noisy_rep() { # mode rep
  local mode=$1 rep=$2 f=$R/$1-$2
  reset_state
  TENANT=${TENANT_A:-tenantA} node dist/noisy-worker-main.js > $f.workerA.log 2>&1 & local wa=$!
  TENANT=${TENANT_B:-tenantB} node dist/noisy-worker-main.js > $f.workerB.log 2>&1 & local wb=$!
  for _ in $(seq 1 150); do grep -q 'WORKER READY' $f.workerA.log && grep -q 'WORKER READY' $f.workerB.log && break; sleep 0.2; done
  gate
  others_cpu > $f.load-before.txt
  watch_start $f.load.txt
  WORKER_A_PID=$wa WORKER_B_PID=$wb node dist/noisy-main.js $mode $NOISY_NA $NOISY_NB $f.json > $f.engine.log 2>&1
  local rc=$?
  watch_stop
  others_cpu > $f.load-after.txt
  kill $wa $wb 2>/dev/null; wait $wa $wb 2>/dev/null
  [[ $mode == a-with-b ]] && $PSQL -f $A/noisy-hops.sql > $f.b-hops.txt 2>&1
  echo "[$mode rep $rep] rc=$rc $(tail -1 $f.engine.log)"
}

for rep in $(seq 1 $REPS); do
  for mode in b-alone a-alone a-with-b; do
    [[ $WHAT == all || $WHAT == $mode ]] && noisy_rep $mode $rep
  done
done
node noisy-summarize.js $R | tee $R/summary.md
echo "results in $R"
