import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { DurableModule, WorkflowService } from '@dudousxd/nestjs-durable';
import { WorkflowEngine } from '@dudousxd/nestjs-durable-core';
import { TypeOrmStateStore, ENTITIES } from '@dudousxd/nestjs-durable-store-typeorm';
import { BullMQTransport } from '@dudousxd/nestjs-durable-transport-bullmq';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { MB, PG, REDIS, pct, procRss } from './common';
import { N_WORKFLOWS, STEP_MODE, TENANT_A, TENANT_B, WORKFLOWS, allStepNames, makeWorkflowClasses } from './noisy-common';

// Noisy-neighbour driver. ONE shared control plane (this process: the operator, namespace unset, so
// it drives every tenant's runs; it owns the TypeORM/Postgres store and runs every workflow body
// inline, exactly like the harness's engine-main.ts) and one worker pool PER TENANT
// (noisy-worker-main.ts with TENANT=tenantA / tenantB). A run's tenant is its namespace, given at
// start: svc.start(wf, input, id, { namespace }). Its steps go to `<step>@<namespace>` queues.
//
// modes:
//   b-alone   NB runs of tenant B one at a time (start, wait for run.completed, next); no A load.
//   a-alone   NA runs of tenant A over the NOISY_WORKFLOWS workflows (round robin), all started at
//             once (every start() issued without awaiting the previous one); measures the drain.
//   a-with-b  a-alone's burst, and while A's backlog drains, b-alone's NB one-at-a-time B runs.
//             B begins when all of A's start() calls have returned (B_AFTER=starts, the default), or
//             B_AFTER=<ms> after the first A start() call was issued.
//
// usage: node dist/noisy-main.js <b-alone|a-alone|a-with-b> <NA> <NB> <out.json>
const MODE = process.argv[2] ?? 'a-with-b';
const NA = Number(process.argv[3] ?? 2000);
const NB = Number(process.argv[4] ?? 20);
const OUT = process.argv[5] ?? `${process.env.ANCHOR_DIR}/results/noisy-${MODE}-${Date.now()}.json`;
const B_AFTER = process.env.B_AFTER ?? 'starts';
const WARMUP_ROUNDS = Number(process.env.WARMUP_ROUNDS ?? 1); // runs per workflow per tenant, unmeasured
const TIMEOUT_MS = Number(process.env.RUN_TIMEOUT_MS ?? 1_200_000);
const WORKER_A_PID = process.env.WORKER_A_PID ? Number(process.env.WORKER_A_PID) : undefined;
const WORKER_B_PID = process.env.WORKER_B_PID ? Number(process.env.WORKER_B_PID) : undefined;
const PG_POOL = process.env.PG_POOL ? Number(process.env.PG_POOL) : undefined; // undefined = pg default (10)

const workflowClasses = makeWorkflowClasses();

@Module({
  imports: [
    DurableModule.forRootAsync({
      useFactory: async () => {
        const ds = new DataSource({
          type: 'postgres',
          ...PG,
          entities: [...ENTITIES],
          synchronize: false,
          logging: false,
          ...(PG_POOL ? { extra: { max: PG_POOL } } : {}),
        });
        await ds.initialize();
        return {
          store: new TypeOrmStateStore(ds),
          transport: new BullMQTransport({ connection: { ...REDIS } }),
        };
      },
    }),
  ],
  providers: [...workflowClasses],
})
class NoisyEngineModule {}

const r1 = (x: number) => Math.round(x * 10) / 10;
function latStats(lat: number[]) {
  const s = [...lat].sort((a, b) => a - b);
  if (s.length === 0) return null;
  return {
    n: s.length,
    p50: r1(pct(s, 50)),
    p90: r1(pct(s, 90)),
    p99: r1(pct(s, 99)),
    min: r1(s[0]),
    max: r1(s[s.length - 1]),
    mean: r1(s.reduce((a, b) => a + b, 0) / s.length),
  };
}

async function main() {
  const app = await NestFactory.createApplicationContext(NoisyEngineModule, {
    logger: ['error', 'warn'],
  });
  await app.init();
  const engine = app.get(WorkflowEngine);
  const svc = app.get(WorkflowService);

  const done = new Map<string, number>();
  const failed = new Map<string, unknown>();
  const waiters = new Map<string, () => void>();
  let aDone = 0;
  let aLastDone = 0;
  let aAllDone!: () => void;
  const aAllDonePromise = new Promise<void>((r) => (aAllDone = r));
  let aExpected = 0;
  let aPrefix = '\u0000';
  engine.subscribe((ev: any) => {
    if (ev.type === 'run.completed') {
      const t = performance.now();
      done.set(ev.runId, t);
      if (ev.runId.startsWith(aPrefix)) {
        aDone++;
        aLastDone = t;
        if (aDone === aExpected) aAllDone();
      }
      waiters.get(ev.runId)?.();
    } else if (ev.type === 'run.failed' || ev.type === 'run.blocked' || ev.type === 'run.dead') {
      failed.set(ev.runId, ev.error ?? ev.type);
      waiters.get(ev.runId)?.();
    }
  });
  const waitFor = (runId: string) =>
    new Promise<void>((resolve) => {
      if (done.has(runId) || failed.has(runId)) return resolve();
      waiters.set(runId, () => {
        waiters.delete(runId);
        resolve();
      });
    });
  const withTimeout = <T>(p: Promise<T>, what: string) =>
    Promise.race([
      p,
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), TIMEOUT_MS).unref()),
    ]);

  const tag = Math.random().toString(36).slice(2, 8);

  // ---- warm-up (not measured): every workflow once per tenant -> every `<step>@<tenant>` queue,
  // the pg pool, BullMQ connections and both tenant workers see traffic before measuring.
  if (WARMUP_ROUNDS > 0) {
    const warm: string[] = [];
    const calls: Promise<unknown>[] = [];
    for (let r = 0; r < WARMUP_ROUNDS; r++) {
      for (const [tenant, short] of [[TENANT_A, 'a'], [TENANT_B, 'b']] as const) {
        WORKFLOWS.forEach((wf, i) => {
          const id = `warm-${tag}-${short}-${r}-${i}`;
          warm.push(id);
          calls.push(svc.start(wf, { i }, id, { namespace: tenant }));
        });
      }
    }
    await withTimeout(Promise.all(calls), 'warm-up starts');
    await withTimeout(Promise.all(warm.map(waitFor)), 'warm-up');
    const wf = warm.filter((id) => failed.has(id));
    if (wf.length) throw new Error(`warm-up: ${wf.length} runs failed, first: ${JSON.stringify(failed.get(wf[0]))}`);
  }

  // ---- sampling during the measured phase: RSS of the engine and both workers, engine event-loop delay
  let enginePeak = 0;
  let workerAPeak = 0;
  let workerBPeak = 0;
  const sample = () => {
    enginePeak = Math.max(enginePeak, procRss('self').rss);
    if (WORKER_A_PID) workerAPeak = Math.max(workerAPeak, procRss(WORKER_A_PID).rss);
    if (WORKER_B_PID) workerBPeak = Math.max(workerBPeak, procRss(WORKER_B_PID).rss);
  };
  sample();
  const sampler = setInterval(sample, 100);
  const eld = monitorEventLoopDelay({ resolution: 10 });
  eld.enable();

  const runA = MODE === 'a-alone' || MODE === 'a-with-b';
  const runB = MODE === 'b-alone' || MODE === 'a-with-b';
  aPrefix = `a-${tag}-`;
  const aIds = runA ? Array.from({ length: NA }, (_, i) => `${aPrefix}${i}`) : [];
  const bIds = runB ? Array.from({ length: NB }, (_, i) => `b-${tag}-${i}`) : [];
  aExpected = aIds.length;
  const starts = new Map<string, number>();
  const bStartReturnedMs: number[] = [];
  const aPendingAtBStart: number[] = [];
  let tA0 = 0;
  let tAStartsReturned = 0;
  let tB0 = 0;
  let tBEnd = 0;

  const progress = setInterval(() => {
    if (runA) console.error(`[progress] t=${Math.round((performance.now() - tA0) / 1000)}s aDone=${aDone}/${NA} bDone=${bIds.filter((id) => done.has(id)).length}/${bIds.length}`);
  }, 10_000);

  const bLoop = async () => {
    tB0 = performance.now();
    for (let i = 0; i < NB; i++) {
      const id = bIds[i];
      aPendingAtBStart.push(aExpected - aDone);
      const t = performance.now();
      starts.set(id, t);
      await svc.start(WORKFLOWS[i % N_WORKFLOWS], { i }, id, { namespace: TENANT_B });
      bStartReturnedMs.push(performance.now() - t);
      await withTimeout(waitFor(id), `b run ${i}`);
    }
    tBEnd = performance.now();
  };

  let aStartCalls: Promise<unknown> = Promise.resolve();
  if (runA) {
    // every start() issued immediately (no await in between), as the harness's W1
    tA0 = performance.now();
    const calls = aIds.map((id, i) => {
      starts.set(id, performance.now());
      return svc.start(WORKFLOWS[i % N_WORKFLOWS], { i }, id, { namespace: TENANT_A });
    });
    aStartCalls = withTimeout(Promise.all(calls), 'A start calls').then(() => {
      tAStartsReturned = performance.now();
    });
  }
  let bDone: Promise<void> = Promise.resolve();
  if (MODE === 'a-with-b') {
    if (B_AFTER === 'starts') await aStartCalls;
    else await new Promise((r) => setTimeout(r, Math.max(0, tA0 + Number(B_AFTER) - performance.now())));
    bDone = bLoop();
  } else if (MODE === 'b-alone') {
    bDone = bLoop();
  }
  await aStartCalls;
  await Promise.all([
    bDone,
    runA ? withTimeout(Promise.race([aAllDonePromise, Promise.all(aIds.map(waitFor))]), 'A completion') : undefined,
  ]);
  clearInterval(progress);
  clearInterval(sampler);
  eld.disable();
  sample();

  const latOf = (ids: string[]) => ids.filter((id) => done.has(id)).map((id) => done.get(id)! - starts.get(id)!);
  const aCompleted = aIds.filter((id) => done.has(id)).length;
  const aWallMs = runA ? aLastDone - tA0 : 0;
  const bLat = latOf(bIds);
  const res = {
    mode: MODE,
    date: new Date().toISOString(),
    tenants: { A: TENANT_A, B: TENANT_B, expressedAs: 'namespace (run) + partition (tenant worker pool)' },
    workflows: N_WORKFLOWS,
    stepMode: STEP_MODE,
    stepQueuesPerTenant: allStepNames().length,
    workerConcurrencyPerQueue: Number(process.env.WORKER_CONCURRENCY ?? 50),
    warmupRunsPerTenant: WARMUP_ROUNDS * N_WORKFLOWS,
    bAfter: MODE === 'a-with-b' ? B_AFTER : undefined,
    A: runA
      ? {
          n: NA,
          completed: aCompleted,
          failed: aIds.filter((id) => failed.has(id)).length,
          startCallsMs: Math.round(tAStartsReturned - tA0),
          wallMs: Math.round(aWallMs),
          runsPerSec: r1(aCompleted / (aWallMs / 1000)),
          latMs: latStats(latOf(aIds)),
        }
      : undefined,
    B: runB
      ? {
          n: NB,
          completed: bLat.length,
          failed: bIds.filter((id) => failed.has(id)).length,
          startedAfterAms: MODE === 'a-with-b' ? Math.round(tB0 - tA0) : undefined,
          wallMs: Math.round(tBEnd - tB0),
          latMs: latStats(bLat),
          perRunMs: bLat.map(r1),
          startCallMs: bStartReturnedMs.map(r1),
          aBacklogAtEachBStart: MODE === 'a-with-b' ? aPendingAtBStart : undefined,
          // every B run overlapped A's backlog only if B finished before A's last completion
          allBDuringABacklog: MODE === 'a-with-b' ? tBEnd <= aLastDone : undefined,
        }
      : undefined,
    firstFailure: failed.size ? String(JSON.stringify([...failed.values()][0])).slice(0, 500) : undefined,
    engineEventLoopDelayMs: {
      p50: r1(eld.percentile(50) / 1e6),
      p99: r1(eld.percentile(99) / 1e6),
      max: r1(eld.max / 1e6),
    },
    rssMB: {
      enginePeak: MB(enginePeak),
      workerAPeak: WORKER_A_PID ? MB(workerAPeak) : null,
      workerBPeak: WORKER_B_PID ? MB(workerBPeak) : null,
    },
  };
  writeFileSync(OUT, JSON.stringify(res, null, 2));
  console.log(JSON.stringify({ mode: MODE, A: res.A && { n: NA, runsPerSec: res.A.runsPerSec, wallMs: res.A.wallMs }, B: res.B?.latMs }));
  await Promise.race([app.close(), new Promise((r) => setTimeout(r, 15000))]);
  process.exit(0);
}
main().catch((e) => {
  console.error('NOISY ENGINE FAILED', e);
  process.exit(1);
});
