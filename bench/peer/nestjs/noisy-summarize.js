// usage: node noisy-summarize.js <results/noisy-STAMP dir> [more dirs...]
// Prints the noisy-neighbour table (medians over repetitions when there are several).
const fs = require('node:fs');
const path = require('node:path');
const runs = { 'b-alone': [], 'a-alone': [], 'a-with-b': [] };
for (const dir of process.argv.slice(2)) {
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.json'))) {
    const j = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
    if (runs[j.mode]) runs[j.mode].push(j);
  }
}
const med = (xs) => {
  const s = xs.filter((x) => x != null && !Number.isNaN(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : Math.round(((s[m - 1] + s[m]) / 2) * 10) / 10;
};
const range = (xs) => (xs.length > 1 ? ` (${Math.min(...xs)}–${Math.max(...xs)}, ${xs.length} reps)` : '');
const fmt = (xs) => `${med(xs)}${range(xs)}`;
const bAlone = runs['b-alone'];
const aAlone = runs['a-alone'];
const aWithB = runs['a-with-b'];
const any = bAlone[0] ?? aAlone[0] ?? aWithB[0];
if (!any) {
  console.log('no results');
  process.exit(0);
}
const nA = (aWithB[0] ?? aAlone[0])?.A?.n;
console.log(`nestjs-durable 0.39.1 noisy neighbour — A = ${nA} runs over ${any.workflows} workflows ` +
  `(${any.stepMode} steps, ${any.stepQueuesPerTenant} step queues per tenant, worker concurrency ` +
  `${any.workerConcurrencyPerQueue}/queue), B = ${(bAlone[0] ?? aWithB[0])?.B?.n} one-at-a-time runs; ${any.date.slice(0, 10)}`);
console.log('');
const bp50a = bAlone.map((r) => r.B.latMs.p50);
const bp99a = bAlone.map((r) => r.B.latMs.p99);
const bp50l = aWithB.map((r) => r.B.latMs.p50);
const bp99l = aWithB.map((r) => r.B.latMs.p99);
const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${Math.round((a / b) * 10) / 10}×` : 'n/a');
console.log('| metric | alone | under the other tenant | ratio |');
console.log('| --- | --- | --- | --- |');
console.log(`| B p50 latency (ms) | ${fmt(bp50a)} | ${fmt(bp50l)} | ${ratio(med(bp50l), med(bp50a))} |`);
console.log(`| B p99 latency (ms) | ${fmt(bp99a)} | ${fmt(bp99l)} | ${ratio(med(bp99l), med(bp99a))} |`);
// Only the B runs that STARTED while A still had runs outstanding actually ran under A's load; with
// a FIFO peer the first B run can absorb the whole backlog, and the rest then run on an idle engine.
const inBacklog = (r) => r.B.perRunMs.filter((_, i) => r.B.aBacklogAtEachBStart[i] > 0);
const pctOf = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] : NaN;
};
const ibN = aWithB.map((r) => inBacklog(r).length);
const ib50 = aWithB.map((r) => pctOf(inBacklog(r), 50));
const ib99 = aWithB.map((r) => pctOf(inBacklog(r), 99));
if (aWithB.length) {
  console.log(`| B p50, only B runs started while A had runs outstanding (${ibN.join('/')} of ${aWithB[0].B.n}) | ${fmt(bp50a)} | ${fmt(ib50)} | ${ratio(med(ib50), med(bp50a))} |`);
  console.log(`| B p99, same runs | ${fmt(bp99a)} | ${fmt(ib99)} | ${ratio(med(ib99), med(bp99a))} |`);
}
const tA = aAlone.map((r) => r.A.runsPerSec);
const tAB = aWithB.map((r) => r.A.runsPerSec);
console.log(`| A throughput (runs/s) | ${fmt(tA)} | ${fmt(tAB)} (with B) | ${ratio(med(tAB), med(tA))} |`);
console.log('');
for (const r of aWithB) {
  console.log(`a-with-b: B started ${r.B.startedAfterAms} ms after A's first start (A's start calls took ` +
    `${r.A.startCallsMs} ms), A backlog at B's starts ${r.B.aBacklogAtEachBStart[0]}→` +
    `${r.B.aBacklogAtEachBStart[r.B.aBacklogAtEachBStart.length - 1]}, all B during A's backlog: ` +
    `${r.B.allBDuringABacklog}; B runs ms: ${r.B.perRunMs.join(' ')}; engine event-loop delay p99 ` +
    `${r.engineEventLoopDelayMs.p99} ms; engine RSS ${r.rssMB.enginePeak} MB`);
}
for (const r of aAlone) {
  console.log(`a-alone: A wall ${r.A.wallMs} ms, start calls ${r.A.startCallsMs} ms, A p50 ${r.A.latMs?.p50} ms; ` +
    `engine event-loop delay p99 ${r.engineEventLoopDelayMs.p99} ms; engine RSS ${r.rssMB.enginePeak} MB`);
}
for (const r of bAlone) console.log(`b-alone: B runs ms: ${r.B.perRunMs.join(' ')}`);
const fails = [...bAlone, ...aAlone, ...aWithB].filter((r) => (r.A?.failed ?? 0) + (r.B?.failed ?? 0) > 0);
if (fails.length) console.log(`FAILURES in ${fails.length} result(s); first: ${fails[0].firstFailure}`);
