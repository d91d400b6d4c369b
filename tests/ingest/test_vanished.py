"""Entries deleted from the stream while pending come back from XCLAIM and XAUTOCLAIM as nil (Redis 6.2,
redis#7021), or are dropped from the pending list by them (Redis 7, Valkey): either way they are
acknowledged and counted once, and the rest of their batch is written."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import orjson
from redis.asyncio import Redis

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.ingest import codec, keys
from tests.ingest.streams import add_entries, count_rows, event
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker


async def _read_as(redis: Redis, consumer: str, source: str, count: int) -> tuple[list[Any], list[Any]]:
    """Add `count` events and have `consumer` read them: the ids of ours, in order, and of whatever else
    nobody had read yet (the stream is the session's: another test file may have left entries unread)."""
    entries = [codec.parse_one(orjson.dumps(event(source, str(uuid.uuid4()), i=i)))[0] for i in range(count)]
    await add_entries(redis, *entries)
    reply: Any = await redis.xreadgroup(keys.GROUP, consumer, {keys.STREAM: ">"})
    streams = reply.items() if isinstance(reply, dict) else reply
    read = [(entry_id, fields[b"e"]) for _, found in streams for entry_id, fields in found]
    ours = set(entries)
    return [i for i, e in read if e in ours], [i for i, e in read if e not in ours]


async def _stats(client: httpx.AsyncClient) -> dict[str, int]:
    stats: dict[str, int] = (await client.get("/ingest/stats", headers=AUTH)).json()
    return stats


async def _still_pending(redis: Redis, entry_ids: list[Any]) -> list[Any]:
    """Which of `entry_ids` the group still holds as read and not acknowledged. Asked of these entries only:
    the stream is the session's, and other tests' leftovers may be pending under consumers long gone."""
    found = []
    for entry_id in entry_ids:
        if await redis.xpending_range(keys.STREAM, keys.GROUP, min=entry_id, max=entry_id, count=1):
            found.append(entry_id)
    return found


async def _rows(stack: Stack, source: str) -> int:
    return await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source)


async def test_an_entry_deleted_while_a_dead_consumer_held_it_does_not_sink_the_claimed_batch(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    vanished_before = (await _stats(client)).get("vanished", 0)
    redis = Redis.from_url(stack.redis.url)
    try:
        ids, others = await _read_as(redis, "ghost-vanish", "wk-vanish-claim", 6)
        await redis.xdel(keys.STREAM, ids[2])
        # The ghost died long ago: its entries look idle to anyone who looks for them. Not the deleted one:
        # from Redis 7 (and in Valkey, the embedded server) an XCLAIM drops a deleted entry from the pending
        # list itself, which would leave the worker nothing to find; it turns idle within the claim idle time.
        alive = [entry_id for entry_id in ids + others if entry_id != ids[2]]
        await redis.xclaim(keys.STREAM, keys.GROUP, "ghost-vanish", 0, alive, idle=600_000)
        spawn_worker(stack, "w-vanish-claim", TENK_INGEST_CLAIM_IDLE_MS="1000", TENK_INGEST_CLAIM_EVERY_MS="200")

        async def landed() -> bool:
            return await _rows(stack, "wk-vanish-claim") == 5

        await eventually(landed, deadline_s(), "the 5 entries that still exist")

        async def forgotten() -> bool:
            stats = await _stats(client)
            return not await _still_pending(redis, ids) and stats["vanished"] == vanished_before + 1

        await eventually(forgotten, deadline_s(), "the deleted entry to be acknowledged and counted")
        await redis.xgroup_delconsumer(keys.STREAM, keys.GROUP, "ghost-vanish")
    finally:
        await redis.aclose()


async def test_an_entry_deleted_while_pending_does_not_sink_the_replayed_batch(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    vanished_before = (await _stats(client)).get("vanished", 0)
    redis = Redis.from_url(stack.redis.url)
    try:
        # A previous run of this worker read these and died; one was deleted meanwhile.
        ids, _ = await _read_as(redis, "w-vanish-replay", "wk-vanish-replay", 6)
        await redis.xdel(keys.STREAM, ids[0], ids[4])
        spawn_worker(stack, "w-vanish-replay")

        async def landed() -> bool:
            return await _rows(stack, "wk-vanish-replay") == 4

        await eventually(landed, deadline_s(), "the 4 entries that still exist")

        async def forgotten() -> bool:
            stats = await _stats(client)
            return not await _still_pending(redis, ids) and stats["vanished"] == vanished_before + 2

        await eventually(forgotten, deadline_s(), "the deleted entries to be acknowledged and counted")
    finally:
        await redis.aclose()
