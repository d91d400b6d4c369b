"""Trimming: an entry leaves the stream only when every consumer group has received and acknowledged it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from tenk.ingest import keys
from tenk.ingest.stream import Correction, ensure_group, read_backlog, reconcile_backlog, trim_acknowledged
from tenk.stack import EmbeddedRedis, start_on_free_port
from tests.ingest.streams import add_entries


@pytest.fixture
async def redis(stack_root: Path) -> AsyncIterator[Redis]:
    server = start_on_free_port(lambda port: EmbeddedRedis(stack_root / "redis", port))
    client = Redis.from_url(server.url)
    try:
        yield client
    finally:
        await client.aclose()
        server.stop()


async def _ids(redis: Redis) -> list[bytes]:
    entries: Any = await redis.xrange(keys.STREAM)
    return [entry_id for entry_id, _ in entries]


async def test_trim_keeps_what_any_group_still_needs(redis: Redis) -> None:
    await ensure_group(redis)
    await add_entries(redis, *[f"event {i}".encode() for i in range(10)])
    await redis.xgroup_create(keys.STREAM, "audit", id="0")
    ids = await _ids(redis)

    await redis.xreadgroup(keys.GROUP, "w1", {keys.STREAM: ">"}, count=6)
    ack = redis.register_script(keys.XACK_COUNTED)
    assert await ack(keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(ids[:4]), b"7 7 7 7"]) == 4
    # Acknowledging again counts nothing: the backlog stays exact.
    assert await ack(keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(ids[:4]), b"7 7 7 7"]) == 0
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

    await ack(keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(ids[4:6]), b"7 7"])
    # Nothing pending: keep the last delivered entry and everything not yet delivered.
    await trim_acknowledged(redis)
    assert await _ids(redis) == ids[5:]
    backlog = await read_backlog(redis)
    assert (backlog.lag, backlog.pending) == (4, 0)


@pytest.mark.parametrize("others_pending", [0, 40], ids=["alone", "among another consumer's entries"])
async def test_acknowledging_counts_each_still_pending_entry_once_with_its_bytes(
    redis: Redis, others_pending: int
) -> None:
    # Only what was still pending is counted, once, whoever else holds entries between these.
    await ensure_group(redis)
    await add_entries(redis, *[b"x" * n for n in range(1, 11)])
    await redis.xreadgroup(keys.GROUP, "w1", {keys.STREAM: ">"}, count=1)
    await add_entries(redis, *[b"other"] * others_pending)
    await redis.xreadgroup(keys.GROUP, "w2", {keys.STREAM: ">"}, count=others_pending or 1)
    await add_entries(redis, b"last one")
    await redis.xreadgroup(keys.GROUP, "w1", {keys.STREAM: ">"})
    ids = await _ids(redis)
    mine = [ids[0], ids[-1]]
    ack = redis.register_script(keys.XACK_COUNTED)
    # Already acknowledged: counts nothing. Given twice in one call: counts once.
    await redis.xack(keys.STREAM, keys.GROUP, ids[-1])
    given = [mine[1], mine[0], mine[0]]
    assert await ack(keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(given), b"8 1 1"]) == 1
    stats = await redis.hgetall(keys.STATS)
    assert (int(stats[b"acked"]), int(stats[b"acked_bytes"])) == (1, 1)
    # The writers' group alone: what it acknowledged is deleted, and nothing else.
    remaining = await _ids(redis)
    assert ids[0] not in remaining
    assert ids[1:] == remaining


async def test_an_error_reply_in_the_backlog_read_is_raised_as_the_redis_error_it_is(redis: Redis) -> None:
    # A cluster mid-failover answers a pipeline's commands with CLUSTERDOWN (a ResponseError); unpacked
    # as if it were the counters, it ended the worker with a TypeError (the cluster chaos test, in CI).
    # A WRONGTYPE reply to the counters' HMGET stands in for it on one server.
    await ensure_group(redis)
    await redis.set(keys.STATS, b"not a hash")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await read_backlog(redis)


async def test_reconcile_resets_the_counters_to_the_pending_and_undelivered_entries(redis: Redis) -> None:
    await ensure_group(redis)
    entries = [f"event {i:02d}".encode() * (i + 1) for i in range(10)]
    await add_entries(redis, *entries)
    ids = await _ids(redis)
    await redis.xreadgroup(keys.GROUP, "ghost", {keys.STREAM: ">"}, count=6)
    ack = redis.register_script(keys.XACK_COUNTED)
    sizes = b" ".join(b"%d" % len(entry) for entry in entries[:2])
    await ack(keys=[keys.STREAM, keys.STATS], args=[keys.GROUP, b" ".join(ids[:2]), sizes])
    # The ghost is deleted holding entries 3-6: they leave the pending list, never acknowledged.
    await redis.xgroup_delconsumer(keys.STREAM, keys.GROUP, "ghost")
    await redis.hincrby(keys.STATS, "added", 1_000_000)
    before = await read_backlog(redis)
    assert before.total == 1_000_008

    # More backlogged entries than it may count: it leaves the counters alone rather than block Redis.
    assert await reconcile_backlog(redis, limit=3) is None
    correction = await reconcile_backlog(redis, limit=100)
    assert correction == Correction(1_000_004, sum(len(entry) for entry in entries[2:6]))
    after = await read_backlog(redis)
    assert (after.lag, after.pending, after.bytes) == (4, 0, sum(len(entry) for entry in entries[6:]))
    assert await reconcile_backlog(redis, limit=100) == Correction(0, 0)

    # Pending entries count too, even one deleted from the stream (it still has to be acknowledged).
    await redis.xreadgroup(keys.GROUP, "w1", {keys.STREAM: ">"}, count=2)
    await redis.xdel(keys.STREAM, ids[6])
    await redis.hset(keys.STATS, "acked", 0)
    await reconcile_backlog(redis, limit=100)
    after = await read_backlog(redis)
    assert (after.lag, after.pending, after.bytes) == (2, 2, sum(len(entry) for entry in entries[7:]))
