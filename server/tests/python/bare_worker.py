"""An unmodified `durable-worker` (PyPI) worker with no partition, under wire prefix
$DURABLE_PREFIX, serving the step names of the demo order: tenants' steps must never reach it.
Every step it runs is appended to $DURABLE_BARE_LOG.

    REDIS_URL=redis://127.0.0.1:6379 DURABLE_PREFIX=durable DURABLE_BARE_LOG=/tmp/bare.log python bare_worker.py
"""
import asyncio
import os

from durable_worker import Worker
from durable_worker.redis_runner import run_redis_worker

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
PREFIX = os.environ.get("DURABLE_PREFIX", "durable")
LOG = os.environ["DURABLE_BARE_LOG"]

worker = Worker(None, redis=REDIS_URL, prefix=PREFIX, auto_register=False)


def recording(name):
    async def run(data, ctx):
        with open(LOG, "a") as log:
            log.write(f"{name}\n")
        return {}

    return run


for step in ("order.reserve", "order.charge", "order.ship"):
    worker.step(step)(recording(step))


async def main():
    handle = await run_redis_worker(
        worker, partition=None, connection=REDIS_URL, prefix=PREFIX, concurrency=4
    )
    print("READY", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await handle.close()


if __name__ == "__main__":
    asyncio.run(main())
