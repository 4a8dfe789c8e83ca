import 'reflect-metadata';
import { DurableModule } from '@dudousxd/nestjs-durable';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { REDIS } from './common';
import { allStepNames, makeStepsClass } from './noisy-common';

// A TENANT worker pool: a store-less NestJS worker in nestjs-durable's documented multi-tenant
// topology, `DurableModule.forRoot({ topology: { role: 'tenant', tenant }, connection })`. The
// preset maps `tenant` to the worker's `partition`, so it consumes only `<step>@<tenant>` queues
// (one BullMQ Worker per step name, concurrency PER QUEUE), i.e. only its own tenant's steps.
//
// usage: TENANT=tenantA node dist/noisy-worker-main.js
const TENANT = process.env.TENANT;
if (!TENANT) throw new Error('set TENANT');
const CONCURRENCY = Number(process.env.WORKER_CONCURRENCY ?? 50);
const Steps = makeStepsClass();

@Module({
  imports: [
    DurableModule.forRoot({
      topology: { role: 'tenant', tenant: TENANT },
      connection: { ...REDIS },
      concurrency: CONCURRENCY,
    }),
  ],
  providers: [Steps],
})
class TenantWorkerModule {}

async function main() {
  const app = await NestFactory.createApplicationContext(TenantWorkerModule, {
    logger: ['error', 'warn'],
  });
  await app.init();
  app.enableShutdownHooks();
  console.log(
    `WORKER READY tenant=${TENANT} pid=${process.pid} concurrency=${CONCURRENCY} stepQueues=${allStepNames().length}`,
  );
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
