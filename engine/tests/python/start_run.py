"""Starts one run through an unmodified `durable-worker` (PyPI) `Worker.start_run`, as a
store-less Python tenant does: a `startRun` job on `<prefix>-start-run` whose `tenant` is the
worker's partition, here our signed tenant token ($DURABLE_TOKEN).

    REDIS_URL=redis://127.0.0.1:6379 DURABLE_PREFIX=durable DURABLE_TOKEN=acme.<sig> \
        python start_run.py billing.close-month '{"orderId": 1}' run-py-1
"""
import asyncio
import json
import os
import sys

from durable_worker import Worker


async def main():
    workflow, raw_input, run_id = sys.argv[1], sys.argv[2], sys.argv[3]
    worker = Worker(
        os.environ["DURABLE_TOKEN"],
        redis=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"),
        prefix=os.environ.get("DURABLE_PREFIX", "durable"),
        auto_register=False,
    )
    await worker.start_run(workflow, json.loads(raw_input), run_id=run_id, tags=["from-python"])


if __name__ == "__main__":
    asyncio.run(main())
