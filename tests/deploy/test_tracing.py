"""Tracing end to end: `tenk serve` and `tenk worker` with TENK_OPS_OTEL_ENDPOINT pointed at an OTLP/HTTP
receiver this test runs, and what they export. With the variable unset nothing is set up."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider

from tenk.lab.mock_upstream import MockUpstreamProcess
from tenk.ops.logging import JsonFormatter
from tenk.ops.settings import OpsSettings
from tenk.ops.tracing import app_factory, install_trace_ids_in_logs, setup_tracing
from tests.conftest import AUTH, Stack
from tests.deploy.otlp import Receiver, Span, receiving
from tests.ingest.conftest import SpawnWorker, event


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP (protobuf) trace receiver on a free loopback port."""
    with receiving() as collected:
        yield collected


def _until(check: Any, within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out after {within}s waiting for {what}")


def _descends_from(span: Span, root: Span, trace: list[Span]) -> bool:
    by_id = {s.span_id: s for s in trace}
    while span.parent_id:
        if span.parent_id == root.span_id:
            return True
        span = by_id.get(span.parent_id, Span("", "", "", "", "", 0, {}, []))
    return False


@pytest.mark.slow
def test_requests_hot_lane_included_trace_postgres_redis_cache_and_upstream(
    stack: Stack, spawn_api: Any, mock: MockUpstreamProcess, receiver: Receiver
) -> None:
    # Export every 100 ms rather than every 5 s: the test waits on the exports.
    api = spawn_api(
        stack,
        server="granian",
        TENK_OPS_OTEL_ENDPOINT=receiver.url,
        TENK_UPSTREAM_URL=mock.url,
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    assert httpx.get(api.base_url + "/products/1777").status_code == 200  # the hot lane
    assert httpx.get(api.base_url + "/tasks", params={"limit": 3}).status_code == 200
    assert httpx.get(api.base_url + "/quotes/MSFT").status_code == 200
    assert httpx.post(api.base_url + "/events", json=event("trace-test"), headers=AUTH).status_code == 202

    product = _until(lambda: receiver.trace_of("/products/1777"), 30, "the product read's trace")
    root = next(s for s in product if s.kind == 2)
    assert root.service == "tenk-api"
    assert "cache.lookup" in root.events
    redis = _until(
        lambda: [s for s in receiver.trace_of("/products/1777") if s.attributes.get("db.system") == "redis"],
        30,
        "a Redis span under the product read",
    )
    assert all(_descends_from(span, root, receiver.trace_of("/products/1777")) for span in redis)

    _until(
        lambda: [s for s in receiver.trace_of("/tasks") if s.attributes.get("db.system") == "postgresql"],
        30,
        "a Postgres span under GET /tasks",
    )
    _until(
        lambda: [
            s for s in receiver.trace_of("/quotes/MSFT") if s.kind == 3 and s.attributes.get("db.system") != "redis"
        ],
        30,
        "the upstream call's client span under GET /quotes",
    )
    assert _until(lambda: receiver.trace_of("/events"), 30, "the POST /events server span")
    # The producer's batched XADD runs in its own task, outside the request: its span is a trace of its own.
    # (Carrying the request's context in the stream entry, to link accept to COPY, is not done yet.)
    _until(
        lambda: [s for s in receiver.spans if s.service == "tenk-api" and s.name.startswith("EVAL")],
        30,
        "the stream write's Redis span",
    )


@pytest.mark.slow
def test_worker_traces_its_postgres_writes(
    stack: Stack, spawn_worker: SpawnWorker, receiver: Receiver, spawn_api: Any
) -> None:
    api = spawn_api(stack)
    worker = spawn_worker(stack, "trace-worker", TENK_OPS_OTEL_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="100")
    assert httpx.post(api.base_url + "/events", json=event("trace-worker"), headers=AUTH).status_code == 202
    writes = _until(
        lambda: [
            s for s in receiver.spans if s.service == "tenk-worker" and s.attributes.get("db.system") == "postgresql"
        ],
        60,
        f"the worker's Postgres spans\n{worker.log_tail()}",
    )
    assert writes


def test_tracing_stays_off_without_an_endpoint() -> None:
    assert setup_tracing("tenk-api", OpsSettings()) is False
    assert app_factory("tenk.app:create_app", traced=False) == "tenk.app:create_app"
    assert app_factory("tenk.app:create_app", traced=True) == "tenk.ops.tracing:create_traced_app"
    assert app_factory("benchmarks.hello:app", traced=True) == "benchmarks.hello:app"


def test_json_log_lines_carry_the_trace_id_of_the_current_span() -> None:
    factory = logging.getLogRecordFactory()
    try:
        install_trace_ids_in_logs()
        tracer = TracerProvider().get_tracer("test")
        with tracer.start_as_current_span("request") as span:
            record = logging.getLogger("tenk.test").makeRecord("tenk.test", logging.INFO, __file__, 1, "hi", (), None)
        outside = logging.getLogger("tenk.test").makeRecord("tenk.test", logging.INFO, __file__, 1, "hi", (), None)
    finally:
        logging.setLogRecordFactory(factory)
    line = orjson.loads(JsonFormatter().format(record))
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert "trace_id" not in orjson.loads(JsonFormatter().format(outside))
