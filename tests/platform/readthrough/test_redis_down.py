"""With Redis down, the widgets example still answers every read, from Postgres through the bulkhead."""

from __future__ import annotations

import asyncio

from harness.clients import AUTH
from harness.stack import Stack
from tenk.platform.readthrough import CacheSettings
from tests.platform.readthrough.widgets import create_widget, postgres_reads, widgets_app, widgets_database
from tests.support.inprocess import app_in_process

WIDGETS = 20
# Far longer than the test: the reads cached before Redis stops stay this process's own.
LONG_LOCAL_TTL = CacheSettings(local_ttl_s=300)


async def test_reads_answer_from_postgres_through_the_bulkhead_while_redis_is_down(private_stack: Stack) -> None:
    database = await widgets_database(private_stack)
    async with app_in_process(widgets_app(private_stack, database, LONG_LOCAL_TTL)) as client:
        widget_ids = [await create_widget(client, f"Widget {n}") for n in range(WIDGETS)]
        cached = widget_ids[: WIDGETS // 2]
        for widget_id in cached:
            assert (await client.get(f"/widgets/{widget_id}")).status_code == 200
        private_stack.redis.stop()
        fallback_before = postgres_reads("redis_down")
        # Cached in this process, and not: every read answers, concurrently too.
        responses = await asyncio.gather(*(client.get(f"/widgets/{widget_id}") for widget_id in widget_ids))
        assert [response.status_code for response in responses] == [200] * WIDGETS
        assert [response.json()["id"] for response in responses] == widget_ids
        assert postgres_reads("redis_down") - fallback_before == WIDGETS - len(cached)
        # Writes still commit, and are seen here at once.
        replaced = await client.put(
            f"/widgets/{widget_ids[0]}", json={"name": "Renamed", "price_cents": 1}, headers=AUTH
        )
        assert replaced.status_code == 200, replaced.text
        assert (await client.get(f"/widgets/{widget_ids[0]}")).json()["name"] == "Renamed"
