"""An unmodified `durable-worker` (PyPI) worker for the interop tests, on partition
$DURABLE_PARTITION (empty for none) of namespace $DURABLE_NAMESPACE (default: none) under wire
prefix $DURABLE_PREFIX. It serves:

- step `billing.invoice` (a Python step of a Rust workflow);
- step `billing.hold`, which never returns in a worker started with `DURABLE_HOLD=1` (a
  worker to kill mid-step) and otherwise answers with its process id;
- workflows `billing.close-month` (a clock read, a step, a sleep, a signal wait and a child)
  and `billing.receipt` (the child), whose turns our control plane drives;
- workflow `billing.routed`, which calls `billing.invoice` on the partition `input.group`
  names (`ctx.step(..., group=...)`, the decision's `call.group`) and reports a refusal.

    REDIS_URL=redis://127.0.0.1:6379 DURABLE_PARTITION=acme DURABLE_PREFIX=durable python billing_worker.py
"""
import asyncio
import os

from durable_worker import FatalError, Worker
from durable_worker.redis_runner import run_redis_worker
from durable_worker.workflow import StepFailed

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
PARTITION = os.environ.get("DURABLE_PARTITION", "acme") or None
PREFIX = os.environ.get("DURABLE_PREFIX", "durable")
NAMESPACE = os.environ.get("DURABLE_NAMESPACE", "default")

worker = Worker(
    PARTITION, namespace=NAMESPACE, redis=REDIS_URL, prefix=PREFIX, auto_register=False
)


@worker.step("billing.invoice")
async def invoice(data, ctx):
    ctx.info("invoicing", {"orderId": data.get("orderId")})
    if data.get("decline"):
        raise FatalError("card declined", "declined", details={"reason": "nsf"})
    return {"invoiceId": f"inv_{data['orderId']}", "amount": data.get("amount", 0)}


@worker.step("billing.hold")
async def hold(data, ctx):
    if os.environ.get("DURABLE_HOLD") == "1":
        await asyncio.sleep(3600)
    return {"heldBy": os.getpid()}


@worker.workflow("billing.close-month", version="1")
def close_month(ctx, inp):
    started = ctx.now()
    invoice = ctx.step("billing.invoice", {"orderId": inp["orderId"], "amount": inp["amount"]})
    ctx.sleep(inp.get("graceMs", 1000))
    approval = ctx.wait_signal("approve")
    receipt = ctx.start_child("billing.receipt", {"invoiceId": invoice["invoiceId"]})
    return {"startedAt": started, "invoice": invoice, "approval": approval, "receipt": receipt}


@worker.workflow("billing.routed", version="1")
def routed(ctx, inp):
    try:
        return {"invoice": ctx.step("billing.invoice", {"orderId": 1}, group=inp["group"])}
    except StepFailed as refused:  # raised from the history's error, catchable
        return {"refused": str(refused)}


@worker.workflow("billing.receipt", version="1")
def receipt(ctx, inp):
    return {"receiptFor": inp["invoiceId"]}


async def main():
    handle = await run_redis_worker(
        worker,
        partition=PARTITION,
        connection=REDIS_URL,
        prefix=PREFIX,
        concurrency=4,
        namespace=NAMESPACE,
    )
    print("READY", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await handle.close()


if __name__ == "__main__":
    asyncio.run(main())
