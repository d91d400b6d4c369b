"""A second cached domain, the widgets example, on the read-through component: a miss reads Postgres once,
then this process and every other answer from their caches; a missing id is remembered."""

from __future__ import annotations

from prometheus_client import REGISTRY

from harness.clients import AUTH
from harness.stack import Stack
from tenk.platform.readthrough import ReadCache
from tests.platform.readthrough.widgets import create_widget, postgres_reads, widgets_app
from tests.support.inprocess import app_in_process


def local_hits() -> float:
    """Widget reads this process answered from its own LRU (not Redis)."""
    labels = {"cache": "widget", "layer": "local", "result": "hit"}
    return REGISTRY.get_sample_value("tenk_cache_lookups_total", labels) or 0.0


async def test_a_miss_reads_postgres_once_then_every_read_is_a_hit(stack: Stack, widgets_db: str) -> None:
    async with app_in_process(widgets_app(stack, widgets_db)) as client:
        widget_id = await create_widget(client, "Sprocket", 250)
        before = postgres_reads()
        miss = await client.get(f"/widgets/{widget_id}")
        assert miss.status_code == 200, miss.text
        assert miss.json() == {"id": widget_id, "name": "Sprocket", "price_cents": 250}
        assert miss.headers["x-cache"] == "MISS"
        assert postgres_reads() == before + 1
        hits = local_hits()
        for _ in range(3):
            hit = await client.get(f"/widgets/{widget_id}")
            assert (hit.headers["x-cache"], hit.content) == ("HIT", miss.content)
        assert (postgres_reads(), local_hits()) == (before + 1, hits + 3)
    # Another process, which has never read it: Redis has it.
    async with app_in_process(widgets_app(stack, widgets_db)) as other:
        from_redis = await other.get(f"/widgets/{widget_id}")
        assert (from_redis.headers["x-cache"], from_redis.content) == ("HIT", miss.content)
        assert postgres_reads() == before + 1


async def test_a_missing_widget_is_a_404_remembered_without_another_read(stack: Stack, widgets_db: str) -> None:
    async with app_in_process(widgets_app(stack, widgets_db)) as client:
        widget_id = await create_widget(client, "Short-lived")
        assert (await client.delete(f"/widgets/{widget_id}", headers=AUTH)).status_code == 204
        before, hits = postgres_reads(), local_hits()
        for _ in range(3):
            gone = await client.get(f"/widgets/{widget_id}")
            assert gone.status_code == 404, gone.text
            assert gone.json()["error"]["fields"] == [{"field": "path.widget_id", "message": "no such widget"}]
        assert postgres_reads() == before + 1, "the negative entry was not kept"
        assert local_hits() == hits + 2, "the negative entry was not kept in this process"
        # Past the highest id stored: no read at all.
        assert (await client.get(f"/widgets/{widget_id + 10**12}")).status_code == 404
        assert postgres_reads() == before + 1


async def test_a_created_widget_is_readable_at_once_though_its_id_was_missing(stack: Stack, widgets_db: str) -> None:
    app = widgets_app(stack, widgets_db)
    async with app_in_process(app) as client:
        cache: ReadCache = app.state.widgets
        highest = await create_widget(client, "Before")
        cache.ceiling.raise_to(highest + 1)  # as if the next id were known and read missing
        assert (await client.get(f"/widgets/{highest + 1}")).status_code == 404
        created = await create_widget(client, "After")
        assert created == highest + 1
        read = await client.get(f"/widgets/{created}")
        assert (read.status_code, read.json().get("name")) == (200, "After")
