"""Trimming: an entry leaves the stream only when every consumer group has received and acknowledged it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tenk.ingest import keys
from tenk.ingest.stream import ensure_group, read_backlog, trim_acknowledged
from tenk.stack import EmbeddedRedis, free_port


@pytest.fixture
async def redis(tmp_path: Path) -> AsyncIterator[Redis]:
    server = EmbeddedRedis(tmp_path / "redis", free_port())
    server.start()
    client = Redis.from_url(server.url)
    try:
        yield client
    finally:
        await client.aclose()
        server.stop()


async def _ids(redis: Redis) -> list[bytes]:
    return [entry_id for entry_id, _ in await redis.xrange(keys.STREAM)]


async def test_trim_keeps_what_any_group_still_needs(redis: Redis) -> None:
    await ensure_group(redis)
    await redis.eval(keys.XADD_MANY, 2, keys.STREAM, keys.STATS, *[f"event {i}".encode() for i in range(10)])
    await redis.xgroup_create(keys.STREAM, "audit", id="0")
    ids = await _ids(redis)

    await redis.xreadgroup(keys.GROUP, "w1", {keys.STREAM: ">"}, count=6)
    ack = redis.register_script(keys.XACK_COUNTED)
    assert await ack(keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(ids[:4])]) == 4
    # Acknowledging again counts nothing: the backlog stays exact.
    assert await ack(keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(ids[:4])]) == 0
    backlog = await read_backlog(redis)
    assert (backlog.lag, backlog.pending) == (4, 2)

    # The audit group has read nothing, so nothing may go.
    assert await trim_acknowledged(redis) == 0
    assert await _ids(redis) == ids

    await redis.xreadgroup("audit", "a1", {keys.STREAM: ">"})
    await redis.xack(keys.STREAM, "audit", *ids)
    # Now the writers' oldest pending entry (the 5th) is the first one still needed.
    assert await trim_acknowledged(redis) == 4
    assert await _ids(redis) == ids[4:]

    await ack(keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(ids[4:6])])
    # Nothing pending: keep the last delivered entry and everything not yet delivered.
    await trim_acknowledged(redis)
    assert await _ids(redis) == ids[5:]
    backlog = await read_backlog(redis)
    assert (backlog.lag, backlog.pending) == (4, 0)
