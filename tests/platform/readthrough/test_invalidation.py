"""A write to a widget, through any process or around the API, drops every process's cached copy: two
apps of the widgets example sharing one Redis and one database, in this process and as `tenk serve`s."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import httpx

from harness.clients import AUTH
from harness.stack import Stack
from tenk.platform.readthrough import CacheSettings
from tests.platform.readthrough.widgets import create_widget, widgets_app
from tests.support.inprocess import app_in_process
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

# A local TTL far longer than the test: seeing the new value can only come from the invalidation. A
# generous ack timeout: with both apps healthy no write reaches it, so each answers after the other
# app confirmed.
LONG_LOCAL_TTL = CacheSettings(local_ttl_s=300, invalidation_ack_timeout_s=5)
ROUNDS = 20
# The outbox is replayed every 0.5 s by every process: generous for a busy machine.
REPLAYED_WITHIN_S = 30.0


async def test_a_write_through_one_process_is_never_served_stale_by_another(stack: Stack, widgets_db: str) -> None:
    writer_app = widgets_app(stack, widgets_db, LONG_LOCAL_TTL)
    reader_app = widgets_app(stack, widgets_db, LONG_LOCAL_TTL)
    async with app_in_process(writer_app) as writer, app_in_process(reader_app) as reader:
        widget_id = await create_widget(writer, "Gear", 100)
        for price in range(101, 101 + ROUNDS):
            assert (await reader.get(f"/widgets/{widget_id}")).status_code == 200
            cached = await reader.get(f"/widgets/{widget_id}")
            assert cached.headers["x-cache"] == "HIT"
            replaced = await writer.put(
                f"/widgets/{widget_id}", json={"name": "Gear", "price_cents": price}, headers=AUTH
            )
            assert replaced.status_code == 200, replaced.text
            # At once, no retry: the write answered only after the reader dropped its copy.
            seen = await reader.get(f"/widgets/{widget_id}")
            assert seen.json()["price_cents"] == price, f"the reader served {seen.text} after the write of {price}"
        assert (await writer.delete(f"/widgets/{widget_id}", headers=AUTH)).status_code == 204
        assert (await reader.get(f"/widgets/{widget_id}")).status_code == 404
        created = await create_widget(writer, "Cog")
        assert (await reader.get(f"/widgets/{created}")).json()["name"] == "Cog"


async def test_a_write_made_around_the_api_reaches_every_cache_through_the_outbox(
    stack: Stack, widgets_db: str
) -> None:
    async with app_in_process(widgets_app(stack, widgets_db, LONG_LOCAL_TTL)) as client:
        widget_id = await create_widget(client, "Spring", 10)
        assert (await client.get(f"/widgets/{widget_id}")).status_code == 200
        assert (await client.get(f"/widgets/{widget_id}")).headers["x-cache"] == "HIT"
        conn = await asyncpg.connect(widgets_db)
        try:
            # psql, a seed, another service: the table's trigger records the write all the same.
            await conn.execute("UPDATE widgets SET price_cents = 11 WHERE id = $1", widget_id)
        finally:
            await conn.close()

        async def new_price_served() -> bool:
            return bool((await client.get(f"/widgets/{widget_id}")).json()["price_cents"] == 11)

        await eventually(new_price_served, REPLAYED_WITHIN_S, "the outbox replay to drop the cached copy", every=0.05)


def test_two_served_processes_of_the_example_never_serve_a_stale_widget(
    stack: Stack, widgets_db: str, spawn_api: Callable[..., ServerProcess]
) -> None:
    # As docs/building-an-api.md serves it. Its local TTL (5 s) outlasts a round many times over: only the
    # invalidation can explain the new row.
    env = {"TENK_DATABASE_URL": widgets_db}
    writer, reader = (spawn_api(stack, app="examples.widgets.app:create_widgets_app", **env) for _ in range(2))
    with httpx.Client(timeout=10) as http:
        created = http.post(f"{writer.base_url}/widgets", json={"name": "Served", "price_cents": 1}, headers=AUTH)
        assert created.status_code == 201, created.text
        url = created.headers["location"]
        for price in range(2, 2 + ROUNDS):
            assert http.get(reader.base_url + url).status_code == 200
            assert http.get(reader.base_url + url).headers["x-cache"] == "HIT"
            body = {"name": "Served", "price_cents": price}
            assert http.put(writer.base_url + url, json=body, headers=AUTH).status_code == 200
            assert http.get(reader.base_url + url).json()["price_cents"] == price
