"""The trace context in a stream entry: written by a traced producer only, counted in the backlog's bytes,
and read back by the worker into links, whatever the field holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import TraceState
from redis.asyncio import Redis

from tenk.ingest import keys
from tenk.ingest.producer import StreamProducer
from tenk.ingest.stream import Correction, ensure_group, reconcile_backlog
from tenk.ingest.tracelinks import MAX_LINKS, current_context, links_to, parse_context
from tenk.stack import EmbeddedRedis, start_on_free_port

UNCAPPED = 2**40
tracer = TracerProvider().get_tracer("test")


@pytest.fixture
async def redis(stack_root: Path) -> AsyncIterator[Redis]:
    server = start_on_free_port(lambda port: EmbeddedRedis(stack_root / "redis", port))
    client = Redis.from_url(server.url)
    try:
        yield client
    finally:
        await client.aclose()
        server.stop()


async def _fields(redis: Redis) -> list[dict[bytes, bytes]]:
    entries: Any = await redis.xrange(keys.STREAM)
    return [fields for _, fields in entries]


async def _added_bytes(redis: Redis) -> int:
    return int(await redis.hget(keys.STATS, "added_bytes") or 0)


async def test_a_traced_producer_stores_the_accepting_span_in_each_entry_and_counts_its_bytes(redis: Redis) -> None:
    await ensure_group(redis)
    producer = StreamProducer(redis, UNCAPPED, UNCAPPED, traced=True)
    producer.start()
    try:
        with tracer.start_as_current_span("POST /events/batch") as span:
            await producer.add([b"first", b"second"])
        # No current span (or one not sampled): nothing to link to, nothing stored.
        await producer.add([b"third"])
    finally:
        await producer.stop()
    context = span.get_span_context()
    traceparent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}".encode()
    assert await _fields(redis) == [
        {keys.FIELD: b"first", keys.TRACE_FIELD: traceparent},
        {keys.FIELD: b"second", keys.TRACE_FIELD: traceparent},
        {keys.FIELD: b"third"},
    ]
    assert await _added_bytes(redis) == len(b"firstsecondthird") + 2 * len(traceparent)
    # The reconciler counts every field of an entry: it agrees with what the append counted.
    assert await reconcile_backlog(redis, 100) == Correction(0, 0)


async def test_an_untraced_producer_writes_entries_as_before_even_inside_a_span(redis: Redis) -> None:
    producer = StreamProducer(redis, UNCAPPED, UNCAPPED)
    producer.start()
    try:
        with tracer.start_as_current_span("POST /events"):
            await producer.add([b"only"])
    finally:
        await producer.stop()
    assert await _fields(redis) == [{keys.FIELD: b"only"}]
    assert await _added_bytes(redis) == len(b"only")


def test_a_stored_context_reads_back_as_the_same_span_tracestate_included() -> None:
    with tracer.start_as_current_span("request") as span:
        plain = current_context()
    assert plain is not None
    parsed = parse_context(plain)
    assert parsed is not None
    assert (parsed.trace_id, parsed.span_id) == (span.get_span_context().trace_id, span.get_span_context().span_id)

    with_state = plain + b" vendor=abc,other=1"
    parsed = parse_context(with_state)
    assert parsed is not None
    assert parsed.trace_state == TraceState([("vendor", "abc"), ("other", "1")])


@pytest.mark.parametrize(
    "field",
    [
        b"",
        b"garbage",
        b"00-" + b"0" * 32 + b"-00f067aa0ba902b7-01",
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-" + b"0" * 16 + b"-01",
        b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 " + b"a=b," * 1000,
        b"\xff\xfe" * 100,
    ],
)
def test_a_field_that_is_not_a_trace_context_is_ignored(field: bytes) -> None:
    assert parse_context(field) is None
    assert links_to([field]) == ([], 1 if field else 0)


def test_an_unreadable_tracestate_leaves_the_link_without_it() -> None:
    parsed = parse_context(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 \xff,,=x")
    assert parsed is not None
    assert not parsed.trace_state


def test_a_batch_links_each_accept_once_and_at_most_the_default_link_limit() -> None:
    contexts = [b"00-%032x-%016x-01" % (n + 1, n + 1) for n in range(MAX_LINKS + 10)]
    # A request's events share its context; entries of older versions carry none.
    entries: list[bytes | None] = [contexts[0], contexts[0], None, b"garbage", *contexts]
    links, unlinked = links_to(entries)
    assert len(links) == MAX_LINKS == 128
    assert [link.context.span_id for link in links] == list(range(1, MAX_LINKS + 1))
    assert unlinked == 10 + 1
