import { Step, Workflow } from '@dudousxd/nestjs-durable';
import type { WorkflowCtx } from '@dudousxd/nestjs-durable-core';
import { Injectable } from '@nestjs/common';

// Noisy-neighbour workload, shared definitions (engine and tenant workers import the same list).
//
// NOISY_WORKFLOWS (default 50) distinct workflows `nz00` … `nz49`, each three sequential remote
// no-op steps, the shape of the harness's W1. With NOISY_STEPS=per-workflow (the default) every
// workflow has its OWN three step names (`nz07.s1`, `nz07.s2`, `nz07.s3`), so the 50 workflows are
// 150 distinct step queues per tenant; with NOISY_STEPS=shared all 50 workflows call the same three
// steps (`nz.s1` … `nz.s3`), i.e. 3 queues per tenant like W1.
//
// Tenants are nestjs-durable namespaces: the engine starts a run with `{ namespace: TENANT_A }`,
// and the engine's stepGroup() then routes the run's steps to the queue `<step>@<tenant>`, which
// only that tenant's worker (DurableModule topology { role: 'tenant', tenant }) consumes.
export const N_WORKFLOWS = Number(process.env.NOISY_WORKFLOWS ?? 50);
export const STEP_MODE = (process.env.NOISY_STEPS ?? 'per-workflow') as 'per-workflow' | 'shared';
export const TENANT_A = process.env.TENANT_A ?? 'tenantA';
export const TENANT_B = process.env.TENANT_B ?? 'tenantB';

export const WORKFLOWS: string[] = Array.from({ length: N_WORKFLOWS }, (_, i) => `nz${String(i).padStart(2, '0')}`);

export function stepNames(wf: string): [string, string, string] {
  const base = STEP_MODE === 'shared' ? 'nz' : wf;
  return [`${base}.s1`, `${base}.s2`, `${base}.s3`];
}

export function allStepNames(): string[] {
  return [...new Set(WORKFLOWS.flatMap((wf) => stepNames(wf)))];
}

/** One @Workflow class per workflow name (the engine process registers all of them). */
export function makeWorkflowClasses(): any[] {
  return WORKFLOWS.map((wf) => {
    const [s1, s2, s3] = stepNames(wf);
    const C = class {
      async run(ctx: WorkflowCtx, input: { i: number }) {
        const a = await ctx.step<{ i: number }>(s1, input);
        const b = await ctx.step<{ i: number }>(s2, a);
        const c = await ctx.step<{ i: number }>(s3, b);
        return c;
      }
    };
    Object.defineProperty(C, 'name', { value: `NoisyWorkflow_${wf}` });
    Workflow({ name: wf, version: '1' })(C);
    return C;
  });
}

/** One provider class carrying a no-op @Step method per step name (served by a tenant worker). */
export function makeStepsClass(): any {
  const C = class {};
  Object.defineProperty(C, 'name', { value: 'NoisySteps' });
  for (const name of allStepNames()) {
    const method = name.replace(/\./g, '_');
    // a distinct function per step: @Step stores its metadata on the function object itself
    const fn = async function (input: unknown) {
      return input;
    };
    const desc: PropertyDescriptor = { value: fn, writable: true, configurable: true, enumerable: false };
    const out = Step(name)(C.prototype, method, desc as any) ?? desc;
    Object.defineProperty(C.prototype, method, out as PropertyDescriptor);
  }
  Injectable()(C);
  return C;
}
