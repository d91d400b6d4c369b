"""A local-only cache (HttpArena's crud rules: in-process cache-aside, an absolute TTL, invalidated on
PUT, no pre-warming): no Redis at all, and a read kept exactly its TTL from the fill."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator

import asyncpg
import pytest

from examples.widgets.routes import WIDGETS
from harness.clients import AUTH
from harness.stack import Stack
from tenk.platform.readthrough import CacheSettings
from tenk.stack import free_port
from tests.platform.readthrough.widgets import create_widget, postgres_reads, widgets_app
from tests.support.inprocess import app_in_process

TTL_S = 0.2
LOCAL_ONLY = CacheSettings(local_only=True, local_ttl_s=TTL_S, ttl_jitter=0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def pool(widgets_db: str) -> AsyncIterator[asyncpg.Pool]:
    async with asyncpg.create_pool(widgets_db, min_size=1, max_size=4) as created:
        yield created


async def test_a_read_is_kept_exactly_its_ttl_from_the_fill(pool: asyncpg.Pool) -> None:
    clock = Clock()
    cache = dataclasses.replace(WIDGETS, settings=LOCAL_ONLY).open(pool, None, clock=clock)
    widget_id = await pool.fetchval("INSERT INTO widgets (name, price_cents) VALUES ('Timed', 5) RETURNING id")
    async with cache.running():
        filled_at = clock.now
        loaded = await cache.reply(widget_id)
        assert (b"x-cache", b"MISS") in loaded.headers
        clock.now = math.nextafter(filled_at + TTL_S, 0)  # the last instant of its TTL
        for _ in range(3):  # reads do not extend it
            hit = cache.cached(widget_id)
            assert hit is not None
            assert (b"x-cache", b"HIT") in hit.headers
            assert hit.body == loaded.body
        clock.now = filled_at + TTL_S
        assert cache.cached(widget_id) is None, "kept past its TTL"
        reads = postgres_reads()
        assert (b"x-cache", b"MISS") in (await cache.reply(widget_id)).headers
        assert postgres_reads() == reads + 1


async def test_a_local_only_app_reads_writes_and_invalidates_with_no_redis_and_warms_nothing(
    stack: Stack, widgets_db: str
) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}"  # nobody listens there
    app = widgets_app(stack, widgets_db, LOCAL_ONLY, redis={"url": nowhere})
    reads, fallback_reads = postgres_reads(), postgres_reads("redis_down")
    async with app_in_process(app) as client:
        assert len(app.state.widgets.local) == 0
        assert postgres_reads() == reads, "a widget was read before any request"
        widget_id = await create_widget(client, "Alone", 1)
        assert (await client.get(f"/widgets/{widget_id}")).headers["x-cache"] == "MISS"
        assert (await client.get(f"/widgets/{widget_id}")).headers["x-cache"] == "HIT"
        replaced = await client.put(f"/widgets/{widget_id}", json={"name": "Alone", "price_cents": 2}, headers=AUTH)
        assert replaced.status_code == 200, replaced.text
        seen = await client.get(f"/widgets/{widget_id}")
        assert (seen.headers["x-cache"], seen.json()["price_cents"]) == ("MISS", 2)
    # Every read was an ordinary one: none asked Redis and fell back to Postgres for want of it.
    assert postgres_reads("redis_down") == fallback_reads
