"""An unmodified `durable-worker` (PyPI) step worker for the interop tests: serves step
`billing.invoice` on partition $DURABLE_PARTITION, under wire prefix $DURABLE_PREFIX.

    REDIS_URL=redis://127.0.0.1:6379 DURABLE_PARTITION=acme DURABLE_PREFIX=durable python step_worker.py
"""
import asyncio
import os

from durable_worker import FatalError, Worker
from durable_worker.redis_runner import run_redis_worker

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
PARTITION = os.environ.get("DURABLE_PARTITION", "acme") or None
PREFIX = os.environ.get("DURABLE_PREFIX", "durable")

worker = Worker(PARTITION, redis=REDIS_URL, prefix=PREFIX, auto_register=False)


@worker.step("billing.invoice")
async def invoice(data, ctx):
    ctx.info("invoicing", {"orderId": data.get("orderId")})
    if data.get("decline"):
        raise FatalError("card declined", "declined", details={"reason": "nsf"})
    return {"invoiceId": f"inv_{data['orderId']}", "amount": data.get("amount", 0)}


async def main():
    handle = await run_redis_worker(
        worker, partition=PARTITION, connection=REDIS_URL, prefix=PREFIX, concurrency=1
    )
    print("READY", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await handle.close()


if __name__ == "__main__":
    asyncio.run(main())
