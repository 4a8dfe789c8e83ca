"""An unmodified `durable-worker` (PyPI) worker on partition acme under wire prefix
$DURABLE_PREFIX, serving the demo order's steps, whose handlers join their run's trace: the SDK
itself ignores a task's `traceparent`, but hands its handlers the task's `context`, where our
control plane puts it too. Spans go to $OTEL_EXPORTER_OTLP_ENDPOINT over OTLP/HTTP with
OpenTelemetry's own Python SDK.

    REDIS_URL=redis://127.0.0.1:6379 DURABLE_PREFIX=durable \
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python traced_worker.py
"""
import asyncio
import os

from durable_worker import Worker
from durable_worker.redis_runner import run_redis_worker
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
PREFIX = os.environ.get("DURABLE_PREFIX", "durable")

provider = TracerProvider(resource=Resource.create({"service.name": "python-worker"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("durable-interop")
propagator = TraceContextTextMapPropagator()

worker = Worker("acme", redis=REDIS_URL, prefix=PREFIX, auto_register=False)


def traced(name):
    async def run(data, ctx):
        carrier = {"traceparent": (ctx.context or {}).get("traceparent", "")}
        with tracer.start_as_current_span(name, context=propagator.extract(carrier)):
            return {name: True}

    return run


for step in ("order.reserve", "order.charge", "order.ship"):
    worker.step(step)(traced(step))


async def main():
    handle = await run_redis_worker(
        worker, partition="acme", connection=REDIS_URL, prefix=PREFIX, concurrency=4
    )
    print("READY", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await handle.close()
        provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
