"""Tracing end to end: `tenk serve` and `tenk worker` with TENK_OPS_OTEL_ENDPOINT pointed at an OTLP/HTTP
receiver this test runs, and what they export. With the variable unset nothing is set up."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from redis.asyncio import Redis

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.ingest import codec, keys
from tenk.ingest.tracelinks import SPAN_NAME
from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tenk.ops.logging import JsonFormatter
from tenk.ops.settings import OpsSettings
from tenk.ops.tracing import app_factory, install_trace_ids_in_logs, setup_tracing
from tests.deploy.otlp import Receiver, Span, receiving
from tests.ingest.streams import count_rows, event
from tests.support.waiting import eventually, eventually_blocking
from tests.support.workers import SpawnWorker


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP (protobuf) trace receiver on a free loopback port."""
    with receiving() as collected:
        yield collected


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

    product = eventually_blocking(lambda: receiver.trace_of("/products/1777"), deadline_s(), "the product read's trace")
    root = next(s for s in product if s.kind == 2)
    assert root.service == "tenk-api"
    assert "cache.lookup" in root.events
    redis = eventually_blocking(
        lambda: [s for s in receiver.trace_of("/products/1777") if s.attributes.get("db.system") == "redis"],
        30,
        "a Redis span under the product read",
    )
    assert all(_descends_from(span, root, receiver.trace_of("/products/1777")) for span in redis)

    eventually_blocking(
        lambda: [s for s in receiver.trace_of("/tasks") if s.attributes.get("db.system") == "postgresql"],
        30,
        "a Postgres span under GET /tasks",
    )
    eventually_blocking(
        lambda: [
            s for s in receiver.trace_of("/quotes/MSFT") if s.kind == 3 and s.attributes.get("db.system") != "redis"
        ],
        30,
        "the upstream call's client span under GET /quotes",
    )
    assert eventually_blocking(lambda: receiver.trace_of("/events"), deadline_s(), "the POST /events server span")
    # The producer's batched XADD runs in its own task, outside the request: its span is a trace of its own
    # (the request's context travels in the stream entry instead: see the link tests below).
    eventually_blocking(
        lambda: [s for s in receiver.spans if s.service == "tenk-api" and s.name.startswith("EVAL")],
        30,
        "the stream write's Redis span",
    )


@pytest.mark.slow
def test_worker_traces_its_postgres_writes(
    private_stack: Stack, spawn_worker: SpawnWorker, receiver: Receiver, spawn_api: Any
) -> None:
    # A stack of its own: on the shared one the stream can still hold entries a traced API accepted.
    api = spawn_api(private_stack)
    worker = spawn_worker(
        private_stack, "trace-worker", TENK_OPS_OTEL_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="100"
    )
    assert httpx.post(api.base_url + "/events", json=event("trace-worker"), headers=AUTH).status_code == 202
    writes = eventually_blocking(
        lambda: [
            s for s in receiver.spans if s.service == "tenk-worker" and s.attributes.get("db.system") == "postgresql"
        ],
        60,
        lambda: f"the worker's Postgres spans\n{worker.log_tail()}",
    )
    assert writes
    # An API without tracing adds no trace context to its entries: the write links to nothing.
    linked = [s for s in _write_spans(receiver) if s.links]
    assert not linked, linked


def _server_spans(receiver: Receiver, path: str) -> list[Span]:
    return [
        s
        for s in receiver.spans
        if s.service == "tenk-api"
        and s.kind == 2
        and path in (s.attributes.get("url.path"), s.attributes.get("http.target"))
    ]


def _write_spans(receiver: Receiver) -> list[Span]:
    return [s for s in receiver.spans if s.service == "tenk-worker" and s.name == SPAN_NAME]


def _traced(receiver: Receiver) -> dict[str, str]:
    # Export every 100 ms rather than every 5 s: the tests wait on the exports.
    return {"TENK_OPS_OTEL_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}


def _linking_to(receiver: Receiver, accept: Span) -> list[Span]:
    return [s for s in _write_spans(receiver) if (accept.trace_id, accept.span_id) in s.links]


@pytest.mark.slow
def test_the_write_of_an_event_links_to_the_request_span_that_accepted_it(
    stack: Stack, spawn_api: Any, spawn_worker: SpawnWorker, receiver: Receiver
) -> None:
    api = spawn_api(stack, **_traced(receiver))
    worker = spawn_worker(stack, "link-worker", **_traced(receiver))
    response = httpx.post(api.base_url + "/events", json=event("link-one"), headers=AUTH)
    assert response.status_code == 202
    [accept] = eventually_blocking(
        lambda: _server_spans(receiver, "/events"), deadline_s(), "the POST /events server span"
    )
    [write] = eventually_blocking(
        lambda: _linking_to(receiver, accept), 60, lambda: f"a write span linked to the accept\n{worker.log_tail()}"
    )
    assert write.kind == 5  # consumer
    # The COPY and the rest of the batch's Postgres work are the write span's children.
    postgres = eventually_blocking(
        lambda: [
            s for s in receiver.spans if s.trace_id == write.trace_id and s.attributes.get("db.system") == "postgresql"
        ],
        30,
        "the write's Postgres spans",
    )
    assert all(s.parent_id == write.span_id for s in postgres)


@pytest.mark.slow
def test_one_batch_write_links_to_every_request_whose_events_it_holds(
    private_stack: Stack, spawn_api: Any, spawn_worker: SpawnWorker, receiver: Receiver
) -> None:
    api = spawn_api(private_stack, **_traced(receiver))
    for n in range(3):
        assert httpx.post(api.base_url + "/events", json=event(f"link-{n}"), headers=AUTH).status_code == 202
    two = [event("link-batch"), event("link-batch")]
    assert httpx.post(api.base_url + "/events/batch", json=two, headers=AUTH).status_code == 202
    accepts = eventually_blocking(
        lambda: (lambda found: found if len(found) == 4 else None)(
            _server_spans(receiver, "/events") + _server_spans(receiver, "/events/batch")
        ),
        30,
        "the four requests' server spans",
    )
    # Started after the POSTs, with a batch of exactly their 5 events: its first read takes all of them.
    worker = spawn_worker(private_stack, "link-batch", TENK_INGEST_BATCH="5", **_traced(receiver))
    writes = eventually_blocking(
        lambda: _write_spans(receiver), 60, lambda: f"the batch's write span\n{worker.log_tail()}"
    )
    assert len(writes) == 1, writes
    [write] = writes
    assert write.attributes["messaging.batch.message_count"] == 5
    # One link per request: the batch request's two events share its accept span.
    assert sorted(write.links) == sorted((s.trace_id, s.span_id) for s in accepts)
    assert write.attributes["tenk.ingest.unlinked_accepts"] == 0


async def _add_by_hand(redis: Redis, *entries: dict[bytes, bytes]) -> None:
    """XADD entries as someone at redis-cli would; the counters are kept exact, as the API keeps them,
    so that the shared stack's backlog stays true for other tests."""
    async with redis.pipeline(transaction=True) as pipe:
        for fields in entries:
            pipe.xadd(keys.STREAM, fields)  # type: ignore[arg-type]
        pipe.hincrby(keys.STATS, "added", len(entries))
        pipe.hincrby(keys.STATS, "added_bytes", sum(len(value) for fields in entries for value in fields.values()))
        await pipe.execute()


def _encoded(source: str) -> tuple[bytes, str]:
    event_id = str(uuid.uuid4())
    entry, _ = codec.parse_one(orjson.dumps(event(source, event_id)))
    return entry, event_id


@pytest.mark.slow
async def test_a_garbled_trace_context_in_an_entry_is_ignored_and_its_event_written_once(
    stack: Stack, spawn_worker: SpawnWorker, receiver: Receiver
) -> None:
    good_trace, good_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    dead_trace, dead_span = "5cf92f3577b34da6a3ce929d0e0e4736", "11f067aa0ba902b7"
    future_span = "22f067aa0ba902b7"
    garbage = [
        b"garbage",
        b"00-" + b"0" * 32 + b"-" + good_span.encode() + b"-01",  # an all-zero trace id is invalid
        f"ff-{good_trace}-{future_span}-01".encode(),  # a version that does not exist
        b"\xff\xfe" * 4000,  # long, and not text
        f"00-{good_trace}-{good_span}-01 ,,=not a tracestate".encode(),  # a bad tracestate: linked without it
    ]
    written = [_encoded("garbled-trace") for _ in garbage]
    old_format, old_id = _encoded("garbled-trace")
    entries = [
        {keys.FIELD: entry, keys.TRACE_FIELD: context} for (entry, _), context in zip(written, garbage, strict=True)
    ]
    entries.append({keys.FIELD: old_format})
    # Refused by the worker's checks: a dead letter, whose log line must carry the write span's trace id.
    entries.append({keys.FIELD: b"not an event", keys.TRACE_FIELD: f"00-{dead_trace}-{dead_span}-01".encode()})
    redis = Redis.from_url(stack.redis.url)
    try:
        await _add_by_hand(redis, *entries)
    finally:
        await redis.aclose()
    worker = spawn_worker(stack, "garbled-trace", **_traced(receiver))
    ids = [event_id for _, event_id in written] + [old_id]

    async def all_written() -> bool:
        return await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE event_id = ANY($1::uuid[])", ids) == 6

    await eventually(all_written, 60, lambda: f"the six events\n{worker.log_tail()}")
    for event_id in ids:
        assert await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE event_id = $1::uuid", event_id) == 1
    assert await count_rows(stack.pg.url, "SELECT count(*) FROM ingest_dead_letters WHERE event_id = ANY($1)", ids) == 0

    linked = await eventually(
        lambda: [s for s in _write_spans(receiver) if (dead_trace, dead_span) in s.links], 30, "the write span"
    )
    links = {link for s in _write_spans(receiver) for link in s.links}
    assert (good_trace, good_span) in links
    assert not [link for link in links if link[0] == "0" * 32 or link[1] == future_span], links
    lines = [orjson.loads(line) for line in worker.log.read_text().splitlines() if line.startswith("{")]
    dead = [line for line in lines if line["msg"].startswith("dead letter") and "malformed" in line["msg"]]
    assert dead, worker.log_tail()
    assert {line.get("trace_id") for line in dead} == {linked[0].trace_id}


@pytest.mark.slow
async def test_a_reclaimed_entry_still_links_to_its_original_accept(
    stack: Stack, spawn_api: Any, spawn_worker: SpawnWorker, receiver: Receiver
) -> None:
    api = spawn_api(stack, **_traced(receiver))
    async with httpx.AsyncClient(base_url=api.base_url) as client:
        response = await client.post("/events", json=event("link-reclaimed"), headers=AUTH)
    assert response.status_code == 202
    redis = Redis.from_url(stack.redis.url)
    try:
        # A consumer read it, then died long ago: the entry is pending, idle, for another worker to claim.
        reply: Any = await redis.xreadgroup(keys.GROUP, "ghost", {keys.STREAM: ">"})
        held: list[Any] = [entry_id for _, stream_entries in _pairs(reply) for entry_id, _ in stream_entries]
        assert held
        await redis.xclaim(keys.STREAM, keys.GROUP, "ghost", 0, held, idle=600_000)
        [accept] = await eventually(
            lambda: _server_spans(receiver, "/events"), deadline_s(), "the POST /events server span"
        )
        worker = spawn_worker(
            stack, "link-claim", TENK_INGEST_CLAIM_IDLE_MS="1000", TENK_INGEST_CLAIM_EVERY_MS="200", **_traced(receiver)
        )
        await eventually(
            lambda: _linking_to(receiver, accept), 60, lambda: f"the claimed entry's write span\n{worker.log_tail()}"
        )
        assert "claimed" in worker.log.read_text()

        async def ghost_holds_nothing() -> bool:
            consumers = await redis.xinfo_consumers(keys.STREAM, keys.GROUP)
            return all(c["pending"] == 0 for c in consumers if c["name"] in ("ghost", b"ghost"))

        await eventually(ghost_holds_nothing, deadline_s(), "the ghost's entries to be claimed")
        await redis.xgroup_delconsumer(keys.STREAM, keys.GROUP, "ghost")
    finally:
        await redis.aclose()


def _pairs(reply: Any) -> list[tuple[object, list[tuple[bytes, object]]]]:
    return list(reply.items()) if isinstance(reply, dict) else list(reply)


def test_tracing_stays_off_without_an_endpoint() -> None:
    assert setup_tracing("tenk-api", OpsSettings()) is False
    assert app_factory("tenk.app:create_app", traced=False) == "tenk.app:create_app"
    assert app_factory("tenk.app:create_app", traced=True) == "tenk.app:create_traced_app"
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
