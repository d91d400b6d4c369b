"""Lowering TENK_INGEST_SHARDS strands nothing: the shards an API once added to are still drained."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
from redis.asyncio import Redis

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.ingest import keys
from tenk.settings import Settings
from tests.ingest.streams import count_rows, event
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker

EVENTS = 40
SOURCE = "fewer-shards"


async def test_events_accepted_on_four_shards_all_land_after_everything_restarts_with_one(
    private_stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
) -> None:
    batch = [event(f"{SOURCE}-{n}", n=n) for n in range(EVENTS)]
    async with app_client_factory(private_stack.settings(ingest={"shards": 4})) as client:
        accepted = await client.post("/events/batch", json=batch, headers=AUTH)
        assert accepted.status_code == 202, accepted.text

    redis = Redis.from_url(private_stack.redis.url)
    try:
        lengths = [await redis.xlen(keys.stream_key(shard)) for shard in range(4)]
    finally:
        await redis.aclose()
    assert sum(lengths) == EVENTS
    assert sum(1 for length in lengths if length) > 1, f"the sources fell into one shard: {lengths}"

    async with app_client_factory(private_stack.settings(ingest={"shards": 1, "backlog_poll_ms": 20})) as client:
        stats = (await client.get("/ingest/stats", headers=AUTH)).json()
        assert stats["backlog"] == EVENTS, "the backlog counts every shard that holds entries"

        spawn_worker(private_stack, "one-shard", TENK_INGEST_SHARDS="1", TENK_INGEST_FLUSH_MS="20")

        async def all_landed() -> bool:
            written = await count_rows(
                private_stack.pg.url, "SELECT count(*) FROM events WHERE source LIKE $1", SOURCE + "-%"
            )
            return written == EVENTS

        await eventually(all_landed, 60, f"{EVENTS} events written")

        # The worker acknowledges only after Postgres committed, so the rows can be there a moment before
        # the backlog reaches zero (seen on a loaded machine): wait for it, dead letters counted alongside.
        async def drained() -> tuple[int, int] | None:
            stats = (await client.get("/ingest/stats", headers=AUTH)).json()
            return (stats["backlog"], stats["dead_letters"]) if stats["backlog"] == 0 else None

        assert await eventually(drained, deadline_s(), "the backlog to reach zero") == (0, 0)


async def test_a_running_worker_starts_reading_the_shards_an_api_adds_later(
    private_stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
) -> None:
    source = "more-shards"
    spawn_worker(private_stack, "one-shard", TENK_INGEST_SHARDS="1", TENK_INGEST_FLUSH_MS="20")
    async with app_client_factory(private_stack.settings(ingest={"shards": 4})) as client:
        accepted = await client.post(
            "/events/batch", json=[event(f"{source}-{n}", n=n) for n in range(EVENTS)], headers=AUTH
        )
        assert accepted.status_code == 202, accepted.text

        async def all_landed() -> bool:
            written = await count_rows(
                private_stack.pg.url, "SELECT count(*) FROM events WHERE source LIKE $1", source + "-%"
            )
            return written == EVENTS

        await eventually(all_landed, 60, f"{EVENTS} events written by a worker configured with one shard")
