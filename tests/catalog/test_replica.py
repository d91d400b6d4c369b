"""Catalog reads on a real streaming replica: a replica that has not replayed a write never fills the
cache with the row from before it."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import orjson
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from harness.clients import AUTH
from harness.stack import Stack
from tenk.app import create_app
from tenk.catalog.service import CatalogService
from tenk.search.service import SearchService
from tenk.stack import start_on_free_port
from tenk.stack.pg_replica import LocalPgReplica
from tests.catalog import keys, metrics
from tests.support.inprocess import app_in_process
from tests.support.waiting import eventually

pytestmark = pytest.mark.cluster

# Generous: replay on an idle replica takes milliseconds, a loaded 2-core machine can take seconds.
REPLAY_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def replica(stack: Stack) -> Iterator[LocalPgReplica]:
    root = Path(tempfile.mkdtemp(prefix="tenk-rep-", dir="/tmp"))
    started = start_on_free_port(lambda port: LocalPgReplica(root / "replica", port, stack.pg))
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
async def replica_app(stack: Stack, replica: LocalPgReplica) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(stack.settings(database={"replica_urls": [replica.url]}))
    async with app_in_process(app) as client:
        yield app, client


async def _on_replica(replica: LocalPgReplica, sql: str, *args: object, as_superuser: bool = False) -> object:
    # Pausing and resuming replay is for superusers; the app's role reads.
    conn = await asyncpg.connect(replica.superuser_url if as_superuser else replica.url)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def _stock_on_replica(replica: LocalPgReplica, product_id: int) -> object:
    return await _on_replica(replica, "SELECT stock FROM products WHERE id = $1", product_id)


async def test_a_miss_of_a_product_not_written_lately_reads_the_replica(
    replica_app: tuple[FastAPI, httpx.AsyncClient], stack: Stack
) -> None:
    app, client = replica_app
    catalog: CatalogService = app.state.catalog
    product_id = 77  # seeded, never written by this module
    redis = Redis.from_url(stack.redis.url)
    try:
        await redis.delete(keys.product_key(product_id), keys.written_lsn_key(product_id))
    finally:
        await redis.aclose()
    catalog.local.clear()
    before = metrics.DB_READ_REPLICA._value.get()
    assert (await client.get(f"/products/{product_id}")).status_code == 200
    assert metrics.DB_READ_REPLICA._value.get() == before + 1
    assert (await client.get("/products", params={"limit": 3})).status_code == 200


async def test_a_write_is_never_filled_stale_from_a_replica_paused_before_replaying_it(
    replica_app: tuple[FastAPI, httpx.AsyncClient], stack: Stack, replica: LocalPgReplica
) -> None:
    app, client = replica_app
    catalog: CatalogService = app.state.catalog
    product = {"sku": f"rep-{uuid.uuid4().hex[:12]}", "name": "Replica kettle", "price_cents": 900, "stock": 1}
    created = await client.post("/products", json=product, headers=AUTH)
    assert created.status_code == 201, created.text
    product_id = created.json()["id"]

    async def replayed_create() -> bool:
        return await _stock_on_replica(replica, product_id) == 1

    await eventually(replayed_create, REPLAY_WITHIN_S, "the replica to replay the create")
    await _on_replica(replica, "SELECT pg_wal_replay_pause()", as_superuser=True)
    try:

        async def paused() -> bool:
            return await _on_replica(replica, "SELECT pg_get_wal_replay_pause_state()") == "paused"

        await eventually(paused, REPLAY_WITHIN_S, "replay to pause")
        replaced = await client.put(f"/products/{product_id}", json={**product, "stock": 2}, headers=AUTH)
        assert replaced.status_code == 200, replaced.text
        # The replica still has the old row: a fill from it would be stale.
        assert await _stock_on_replica(replica, product_id) == 1

        behind_before = metrics.REPLICA_BEHIND._value.get()
        catalog.local.clear()  # as on another API node, which has never seen this product
        for _ in range(3):
            got = await client.get(f"/products/{product_id}")
            assert got.status_code == 200
            assert got.json()["stock"] == 2
        assert metrics.REPLICA_BEHIND._value.get() == behind_before + 1
        redis = Redis.from_url(stack.redis.url)
        try:
            cached = await redis.get(keys.product_key(product_id))
        finally:
            await redis.aclose()
        assert cached is not None
        assert orjson.loads(cached)["stock"] == 2
    finally:
        await _on_replica(replica, "SELECT pg_wal_replay_resume()", as_superuser=True)

    async def replayed_write() -> bool:
        return await _stock_on_replica(replica, product_id) == 2

    await eventually(replayed_write, REPLAY_WITHIN_S, "the replica to replay the write")


async def test_search_pages_read_from_a_replica_live_their_ttl_even_while_no_product_changes(
    stack: Stack, replica: LocalPgReplica
) -> None:
    # A page reloaded from a replica that has not replayed a write, after this process heard of the write,
    # holds the old answer: kept for the quiet TTL (an hour here), the new product would never show.
    settings = stack.settings(
        database={"replica_urls": [replica.url]}, search={"cache_ttl_s": 0.5, "cache_quiet_ttl_s": 3_600.0}
    )
    word = "zr" + uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop"))
    app = create_app(settings)
    async with app_in_process(app) as client:
        search: SearchService = app.state.search
        for _ in range(3):  # the second sighting is loaded and kept
            assert (await client.get("/search", params={"q": word})).json()["items"] == []
        await _on_replica(replica, "SELECT pg_wal_replay_pause()", as_superuser=True)
        try:

            async def paused() -> bool:
                return await _on_replica(replica, "SELECT pg_get_wal_replay_pause_state()") == "paused"

            await eventually(paused, REPLAY_WITHIN_S, "replay to pause")
            product = {"sku": f"rep-search-{word}", "name": f"{word} kettle", "price_cents": 900}
            assert (await client.post("/products", json=product, headers=AUTH)).status_code == 201
            assert search.pages is not None
            writes_after_the_write = search.pages.writes

            async def reloaded_from_the_paused_replica() -> bool:
                items = (await client.get("/search", params={"q": word})).json()["items"]
                assert items == [], "the replica is paused: it cannot know the product yet"
                return search.pages is not None and search.pages.writes > writes_after_the_write

            await eventually(reloaded_from_the_paused_replica, REPLAY_WITHIN_S, "the page to reload after the write")
        finally:
            await _on_replica(replica, "SELECT pg_wal_replay_resume()", as_superuser=True)

        async def found() -> list[str]:
            return [item["sku"] for item in (await client.get("/search", params={"q": word})).json()["items"]]

        assert await eventually(found, REPLAY_WITHIN_S, "the product in the search once replayed") == [product["sku"]]
