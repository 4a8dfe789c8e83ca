"""An unmodified `durable-worker` (PyPI) worker for the chaos test, on partition acme under wire
prefix $DURABLE_PREFIX. It serves workflow `chaos.ledger` (a step, a timer, a step), whose turns
our control planes drive, and its steps `ledger.debit` and `ledger.credit`. Every step execution
appends `<step_id>\t<started_ms>\t<pid>` to $DURABLE_DEMO_EFFECTS/python-executions.log, as the
demo steps of `durable worker` do to executions.log.

    REDIS_URL=redis://127.0.0.1:6379 DURABLE_PREFIX=durable DURABLE_DEMO_EFFECTS=/tmp/fx python chaos_worker.py
"""
import asyncio
import os
import time

from durable_worker import Worker
from durable_worker.redis_runner import run_redis_worker

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
PREFIX = os.environ.get("DURABLE_PREFIX", "durable")
LOG = os.path.join(os.environ["DURABLE_DEMO_EFFECTS"], "python-executions.log")

worker = Worker("acme", redis=REDIS_URL, prefix=PREFIX, auto_register=False)


def recording(verb):
    async def run(data, ctx):
        started = int(time.time() * 1000)
        with open(LOG, "a") as log:
            log.write(f"{ctx._run_id}:{ctx._seq}\t{started}\t{os.getpid()}\n")
        await asyncio.sleep(data.get("ms", 100) / 1000)
        return {verb: True}

    return run


worker.step("ledger.debit")(recording("debited"))
worker.step("ledger.credit")(recording("credited"))


@worker.workflow("chaos.ledger", version="1")
def ledger(ctx, inp):
    debit = ctx.step("ledger.debit", {"ms": inp.get("ms", 100)})
    ctx.sleep(200)
    credit = ctx.step("ledger.credit", {"ms": inp.get("ms", 100)})
    return {"debit": debit, "credit": credit}


async def main():
    handle = await run_redis_worker(
        worker, partition="acme", connection=REDIS_URL, prefix=PREFIX, concurrency=8
    )
    print("READY", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await handle.close()


if __name__ == "__main__":
    asyncio.run(main())
