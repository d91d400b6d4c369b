"""`tenk worker` against the real stack: events land once, bad ones are set aside, and nothing waits on a read."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import httpx
import orjson
from redis.asyncio import Redis

from harness.clients import AUTH, stored_id
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.ingest import codec, keys
from tests.ingest.streams import add_entries, count_rows, event
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker


async def _rows(stack: Stack, source: str) -> int:
    return await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source)


async def test_accepted_events_are_written_and_read_back(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    spawn_worker(stack, "w-readback")
    # Backslashes, quotes, tabs and newlines must survive the trip through COPY's text format.
    awkward = 'tab\there, back\\slash \\N, "quotes", ünïcødé \U0001f600\nnew line'
    events = [event("wk-read", str(uuid.uuid4()), i=i, text=awkward) for i in range(7)]
    assert (await client.post("/events/batch", json=events, headers=AUTH)).status_code == 202

    async def landed() -> bool:
        return await _rows(stack, "wk-read") == 7

    await eventually(landed, deadline_s(), "7 rows")
    one = (await client.get(f"/events/{events[3]['event_id']}", headers=AUTH)).json()
    assert one["payload"] == {"i": 3, "text": awkward}
    assert one["ts"].startswith("2026-01-02T03:04:05.123456")

    seen: list[str] = []
    url = "/sources/wk-read/events?limit=3"
    while url:
        page = (await client.get(url, headers=AUTH)).json()
        seen += [item["event_id"] for item in page["items"]]
        url = f"/sources/wk-read/events?limit=3&after={page['next']}" if page["next"] else ""
    assert sorted(seen) == sorted(stored_id(str(e["event_id"])) for e in events)


async def test_the_same_ids_posted_twice_leave_one_row_each(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    spawn_worker(stack, "w-dupes")
    events = [event("wk-dupes", str(uuid.uuid4()), i=i) for i in range(50)]
    for _ in range(2):
        assert (await client.post("/events/batch", json=events, headers=AUTH)).status_code == 202
    # And once more inside a single batch.
    assert (await client.post("/events/batch", json=events[:10] * 2, headers=AUTH)).status_code == 202

    async def drained() -> bool:
        stats = (await client.get("/ingest/stats", headers=AUTH)).json()
        return stats["backlog"] == 0 and await _rows(stack, "wk-dupes") == 50

    await eventually(drained, deadline_s(), "the backlog to drain")
    dead = await count_rows(stack.pg.url, "SELECT count(*) FROM ingest_dead_letters WHERE entry LIKE '%wk-dupes%'")
    assert dead == 0


async def test_a_poison_event_goes_to_the_dead_letter_table_and_the_rest_land(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    # The API refuses what Postgres would; a poison entry comes from a producer that skipped it. Its
    # braces pass the worker's own checks, so only Postgres finds it: by bisecting the batch.
    good = [codec.parse_one(orjson_event(i))[0] for i in range(20)]
    poison_id = str(uuid.uuid4())
    poison = b"\t".join([poison_id.encode(), b"wk-poison", b"2026-01-01T00:00:00+00:00", b"0", b'{"a":nope}'])
    redis = Redis.from_url(stack.redis.url)
    try:
        await add_entries(redis, *good[:10], poison, *good[10:])
    finally:
        await redis.aclose()
    spawn_worker(stack, "w-poison")

    async def landed() -> bool:
        return await _rows(stack, "wk-poison") == 20

    await eventually(landed, deadline_s(), "the 20 good rows")
    reason = await eventually(
        lambda: fetch_reason(stack, poison_id), deadline_s(), "the poison event in the dead-letter table"
    )
    assert "invalid input syntax for type json" in reason
    assert await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE event_id = $1", uuid.UUID(poison_id)) == 0
    stats = (await client.get("/ingest/stats", headers=AUTH)).json()
    assert stats["dead_letters"] >= 1


def orjson_event(i: int) -> bytes:
    import orjson

    return orjson.dumps(event("wk-poison", str(uuid.uuid4()), i=i))


async def fetch_reason(stack: Stack, event_id: str) -> str | None:
    import asyncpg

    conn = await asyncpg.connect(stack.pg.url)
    try:
        reason: str | None = await conn.fetchval("SELECT reason FROM ingest_dead_letters WHERE event_id = $1", event_id)
        return reason
    finally:
        await conn.close()


async def test_the_flush_timer_fires_while_a_read_is_blocked(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    # A read blocks for 20 s and a batch needs 10,000 events: only the timer can flush these three.
    spawn_worker(stack, "w-timer", TENK_INGEST_BLOCK_MS="20000", TENK_INGEST_BATCH="10000", TENK_INGEST_FLUSH_MS="200")
    await eventually(lambda: _consumer_exists("w-timer", stack), deadline_s(), "the worker to join the group")
    await _until_blocked(stack)
    sent = time.monotonic()
    events = [event("wk-timer", str(uuid.uuid4())) for _ in range(3)]
    assert (await client.post("/events/batch", json=events, headers=AUTH)).status_code == 202

    async def landed() -> bool:
        return await _rows(stack, "wk-timer") == 3

    await eventually(landed, deadline_s(), "3 rows")
    assert time.monotonic() - sent < 5


async def _until_blocked(stack: Stack) -> None:
    """Until a client of Redis is blocked in XREADGROUP: the worker's first read has reached Redis."""
    redis = Redis.from_url(stack.redis.url)
    try:

        async def blocked() -> bool:
            clients = await redis.client_list()
            return any(c.get("cmd") == "xreadgroup" and "b" in c.get("flags", "") for c in clients)

        await eventually(blocked, deadline_s(), "the worker's read to block in Redis")
    finally:
        await redis.aclose()


async def _consumer_exists(name: str, stack: Stack) -> bool:
    redis = Redis.from_url(stack.redis.url)
    try:
        consumers = await redis.xinfo_consumers(keys.STREAM, keys.GROUP)
        return any(c["name"] in (name, name.encode()) for c in consumers)
    finally:
        await redis.aclose()


async def test_sigterm_flushes_what_the_worker_holds(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    # Neither the batch size nor the timer would flush within the test: only the shutdown can.
    worker = spawn_worker(
        stack, "w-sigterm", TENK_INGEST_BATCH="10000", TENK_INGEST_FLUSH_MS="600000", TENK_INGEST_BLOCK_MS="100"
    )
    await eventually(lambda: _consumer_exists("w-sigterm", stack), deadline_s(), "the worker to join the group")
    events = [event("wk-sigterm", str(uuid.uuid4())) for _ in range(25)]
    assert (await client.post("/events/batch", json=events, headers=AUTH)).status_code == 202

    async def held() -> bool:
        return bool((await client.get("/ingest/stats", headers=AUTH)).json()["lag"] == 0)

    await eventually(held, deadline_s(), "the worker to read the events")
    assert await _rows(stack, "wk-sigterm") == 0
    assert worker.terminate() == 0, worker.log_tail()
    assert await _rows(stack, "wk-sigterm") == 25
    assert (await client.get("/ingest/stats", headers=AUTH)).json()["pending"] == 0


async def test_insert_mode_one_event_per_flush_writes_the_same_rows(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    # The ladder's "worker that INSERTs each row" rung: no COPY, no batching.
    spawn_worker(stack, "w-insert", TENK_INGEST_WRITE_MODE="insert", TENK_INGEST_BATCH="1")
    awkward = 'tab\there, back\\slash \\N, "quotes", ünïcødé'
    events = [event("wk-insert", str(uuid.uuid4()), i=i, text=awkward) for i in range(12)]
    for _ in range(2):
        assert (await client.post("/events/batch", json=events, headers=AUTH)).status_code == 202

    async def landed() -> bool:
        return (
            await _rows(stack, "wk-insert") == 12
            and (await client.get("/ingest/stats", headers=AUTH)).json()["backlog"] == 0
        )

    await eventually(landed, deadline_s(), "12 rows, each once")
    one = (await client.get(f"/events/{events[5]['event_id']}", headers=AUTH)).json()
    assert one["payload"] == {"i": 5, "text": awkward}


async def test_an_entry_delivered_too_often_is_claimed_from_a_dead_consumer_and_dead_lettered(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    event_id = str(uuid.uuid4())
    entry, _ = codec.parse_one(orjson.dumps(event("wk-ghost", event_id)))
    redis = Redis.from_url(stack.redis.url)
    try:
        await add_entries(redis, entry)
        # A consumer that read it, kept crashing on it (50 deliveries) and is long gone.
        reply = await redis.xreadgroup(keys.GROUP, "ghost", {keys.STREAM: ">"})
        ids: list[Any] = [entry_id for _, entries in _streams(reply) for entry_id, _ in entries]
        assert ids
        await redis.xclaim(keys.STREAM, keys.GROUP, "ghost", 0, ids, idle=600_000, retrycount=50)
        spawn_worker(stack, "w-claim", TENK_INGEST_CLAIM_IDLE_MS="1000", TENK_INGEST_CLAIM_EVERY_MS="200")
        reason = await eventually(lambda: fetch_reason(stack, event_id), deadline_s(), "the dead letter")
        # 51 when the first claim dead-letters it; on a starved machine the worker can claim it from itself
        # again before its first claim is written (the test's claim idle is 1 s): seen once as 52.
        delivered = re.fullmatch(r"delivered (\d+) times", reason)
        assert delivered is not None, reason
        assert int(delivered.group(1)) > 50, reason
        assert await _rows(stack, "wk-ghost") == 0
        # Everything the ghost held (this entry and anything else it read) was taken over.
        await eventually(lambda: _ghost_holds_nothing(redis), deadline_s(), "the ghost's entries to be claimed")
        await redis.xgroup_delconsumer(keys.STREAM, keys.GROUP, "ghost")
    finally:
        await redis.aclose()


def _streams(reply: Any) -> list[tuple[object, list[tuple[bytes, object]]]]:
    return list(reply.items()) if isinstance(reply, dict) else list(reply)


async def _ghost_holds_nothing(redis: Redis) -> bool:
    consumers = await redis.xinfo_consumers(keys.STREAM, keys.GROUP)
    return all(c["pending"] == 0 for c in consumers if c["name"] in ("ghost", b"ghost"))
