"""The backlog cap in bytes keeps the stream from filling Redis, and a drifted backlog counter heals."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
from redis.asyncio import Redis

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.ingest import keys
from tenk.settings import Settings
from tests.ingest.streams import post_until_refused
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker

BYTE_CAP = 200_000
PAYLOAD = "x" * 3_000
BATCH = 10


async def _stream_bytes(redis: Redis) -> int:
    entries: Any = await redis.xrange(keys.STREAM)
    return sum(len(fields[keys.FIELD]) for _, fields in entries)


async def test_past_the_byte_cap_the_stream_refuses_batches_whole_with_503_and_counts_exactly(
    private_stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
) -> None:
    # The API's view of the backlog is refreshed once a minute: only the append script can refuse in time.
    ingest = {"max_backlog_bytes": BYTE_CAP, "backlog_poll_ms": 60_000}
    async with app_client_factory(private_stack.settings(ingest=ingest)) as client:
        await _fill_past_the_byte_cap_then_drain(client, private_stack, spawn_worker)


async def _fill_past_the_byte_cap_then_drain(
    client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker
) -> None:
    redis = Redis.from_url(stack.redis.url)
    try:
        batch: list[dict[str, object]] = [
            {"source": "cap-bytes", "ts": "2026-01-01T00:00:00Z", "payload": {"p": PAYLOAD}} for _ in range(BATCH)
        ]
        accepted, _ = await post_until_refused(client, lambda: batch, 3 * BYTE_CAP // (BATCH * len(PAYLOAD)))
        # Refused whole: the stream holds exactly the accepted events, and never more bytes than the cap.
        assert await redis.xlen(keys.STREAM) == accepted
        held = await _stream_bytes(redis)
        assert BYTE_CAP - BATCH * (len(PAYLOAD) + 100) < held <= BYTE_CAP
        stats = (await client.get("/ingest/stats", headers=AUTH)).json()
        assert (stats["backlog_bytes"], stats["max_backlog_bytes"]) == (held, BYTE_CAP)

        # A consumer takes the oldest entry and dies: trimming can remove nothing after it for a minute.
        reply: Any = await redis.xreadgroup(keys.GROUP, "ghost", {keys.STREAM: ">"}, count=1)
        [(_, [(stuck_id, stuck)])] = reply
        spawn_worker(stack, "cap-bytes", TENK_INGEST_FLUSH_MS="20")

        async def drained() -> bool:
            stats = (await client.get("/ingest/stats", headers=AUTH)).json()
            return bool(stats["backlog"] == 1 and stats["rows_written"] == accepted - 1)

        await eventually(drained, deadline_s(), f"{accepted - 1} rows written")
        # Acknowledged by exactly the bytes that were added, and gone from memory although trimming is stuck.
        assert (await client.get("/ingest/stats", headers=AUTH)).json()["backlog_bytes"] == len(stuck[keys.FIELD])
        left: Any = await redis.xrange(keys.STREAM)
        assert [entry_id for entry_id, _ in left] == [stuck_id]
        ok = await client.post("/events/batch", json=batch, headers=AUTH)
        assert ok.status_code == 202, ok.text
    finally:
        await redis.aclose()


async def test_a_corrupted_backlog_counter_heals_and_ingestion_resumes(
    private_stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
) -> None:
    async with app_client_factory(
        private_stack.settings(ingest={"max_backlog": 1000, "backlog_poll_ms": 20})
    ) as client:
        await _corrupt_then_heal(client, private_stack, spawn_worker)


async def _corrupt_then_heal(client: httpx.AsyncClient, stack: Stack, spawn_worker: SpawnWorker) -> None:
    redis = Redis.from_url(stack.redis.url)
    try:
        one = {"source": "heal", "ts": "2026-01-01T00:00:00Z", "payload": {}, "event_id": str(uuid.uuid4())}
        assert (await client.post("/events", json=one, headers=AUTH)).status_code == 202
        # What a consumer deleted while holding entries, or a lost acknowledgement, leaves behind.
        await redis.hincrby(keys.STATS, "added", 1_000_000)
        await redis.hincrby(keys.STATS, "added_bytes", 10_000_000)

        async def refusing() -> bool:
            response = await client.post("/events", json=one, headers=AUTH)
            return response.status_code == 503

        await eventually(refusing, deadline_s(), "the inflated counter to stop ingestion")
        spawn_worker(stack, "healer", TENK_INGEST_RECONCILE_EVERY_MS="200")

        async def accepting() -> bool:
            response = await client.post("/events", json=one, headers=AUTH)
            return response.status_code == 202

        await eventually(accepting, deadline_s(), "the counter to heal and ingestion to resume")
        stats = (await client.get("/ingest/stats", headers=AUTH)).json()
        assert stats["reconciled"] >= 1
        assert stats["backlog"] < 1000
        assert stats["backlog_bytes"] < 10_000
    finally:
        await redis.aclose()
