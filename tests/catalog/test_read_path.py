from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest
from redis.asyncio import Redis

from harness.clients import AUTH
from harness.stack import Stack
from tenk.catalog.service import CatalogService
from tenk.platform.readthrough import Row
from tenk.platform.readthrough._keys import FILL_IF_UNCHANGED
from tenk.platform.turn_batch import TurnBatch
from tests.catalog import keys


async def test_a_burst_of_200_misses_on_one_key_costs_one_select(
    counted_service: tuple[CatalogService, list[str]], stack: Stack
) -> None:
    service, statements = counted_service
    product_id = 1234
    redis = Redis.from_url(stack.redis.url)
    await redis.delete(keys.product_key(product_id))
    await redis.aclose()
    statements.clear()
    bodies = [reply.body for reply in await asyncio.gather(*(service.product_reply(product_id) for _ in range(200)))]
    selects = [q for q in statements if "FROM products WHERE id" in q]
    assert len(selects) == 1, selects
    assert len(set(bodies)) == 1
    assert b'"id":1234' in bodies[0]


async def test_missing_ids_are_negatively_cached(counted_service: tuple[CatalogService, list[str]]) -> None:
    service, statements = counted_service
    service.ceiling.raise_to(2**63 - 1)  # as if the id were within the catalogue's range, and deleted
    statements.clear()
    assert (await service.product_reply(987_654_321)).status == 404
    assert (await service.product_reply(987_654_321)).status == 404
    assert len([q for q in statements if "FROM products WHERE id" in q]) == 1


async def test_missing_product_is_404_naming_the_field(client: httpx.AsyncClient) -> None:
    response = await client.get("/products/99999999")
    assert response.status_code == 404
    assert response.json()["error"]["fields"][0]["field"] == "path.product_id"


@pytest.mark.parametrize("bad_id", ["0", "-1", "abc", "1.5", "99999999999999999999", "%C2%B2"])
async def test_bad_product_ids_are_422(client: httpx.AsyncClient, bad_id: str) -> None:
    response = await client.get(f"/products/{bad_id}")
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "path.product_id"


async def test_cached_bytes_are_served_as_stored(client: httpx.AsyncClient, stack: Stack) -> None:
    first = await client.get("/products/42")
    second = await client.get("/products/42")
    assert first.content == second.content
    redis = Redis.from_url(stack.redis.url)
    try:
        assert await redis.get(keys.product_key(42)) == first.content
    finally:
        await redis.aclose()


async def test_a_fill_from_before_a_write_never_lands_in_redis(stack: Stack) -> None:
    """The race cache-aside usually loses: read old row, writer commits and deletes, reader sets old row."""
    redis = Redis.from_url(stack.redis.url)
    try:
        fill = redis.register_script(FILL_IF_UNCHANGED)
        product_key, generation_key = keys.product_key(1999), keys.generation_key(1999)
        await redis.delete(product_key, generation_key)
        seen_generation = ""  # the reader saw no generation before its SELECT
        await redis.incr(generation_key)  # a write commits meanwhile
        assert await fill(keys=[product_key, generation_key], args=[seen_generation, b"old", 60_000]) == 0
        assert await redis.get(product_key) is None
        assert await fill(keys=[product_key, generation_key], args=["1", b"new", 60_000]) == 1
        assert await redis.get(product_key) == b"new"
    finally:
        await redis.aclose()


async def test_a_write_is_visible_to_the_next_read(client: httpx.AsyncClient) -> None:
    before = (await client.get("/products/77")).json()
    patched = await client.patch("/products/77", json={"stock": before["stock"] + 1}, headers=AUTH)
    assert patched.status_code == 200
    assert (await client.get("/products/77")).json()["stock"] == before["stock"] + 1


async def test_create_replace_patch_and_list(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/products", json={"sku": "T-CRUD-1", "name": "Test Lamp", "price_cents": 1500, "stock": 3}, headers=AUTH
    )
    assert created.status_code == 201
    product_id = created.json()["id"]
    replaced = await client.put(
        f"/products/{product_id}",
        json={"sku": "T-CRUD-1", "name": "Test Lamp 2", "price_cents": 1600},
        headers=AUTH,
    )
    assert replaced.json()["name"] == "Test Lamp 2"
    assert replaced.json()["stock"] == 0
    duplicate = await client.post("/products", json={"sku": "T-CRUD-1", "name": "Dup", "price_cents": 1}, headers=AUTH)
    assert duplicate.status_code == 409
    assert duplicate.json()["error"]["fields"][0]["field"] == "body.sku"
    empty_patch = await client.patch(f"/products/{product_id}", json={}, headers=AUTH)
    assert empty_patch.status_code == 422
    null_patch = await client.patch(f"/products/{product_id}", json={"name": None}, headers=AUTH)
    assert null_patch.status_code == 422
    missing = await client.patch("/products/88888888", json={"stock": 1}, headers=AUTH)
    assert missing.status_code == 404


async def test_product_listing_walks_every_product_once(client: httpx.AsyncClient) -> None:
    seen: list[int] = []
    cursor = None
    for _ in range(100):
        params = {"limit": "100", **({"after": cursor} if cursor else {})}
        page = (await client.get("/products", params=params)).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert set(range(1, 2001)) <= set(seen)


async def test_a_read_after_an_invalidation_never_joins_a_load_begun_before_it(
    counted_service: tuple[CatalogService, list[str]], stack: Stack
) -> None:
    """A load that read the row before a write may still be waiting (a Redis fill, a lagging replica):
    a read that comes after the invalidation must get the new row, not that load's old one."""
    service, _ = counted_service
    product_id = 1357
    redis = Redis.from_url(stack.redis.url)
    try:
        await redis.delete(keys.product_key(product_id))
    finally:
        await redis.aclose()
    read_the_old_row, release = asyncio.Event(), asyncio.Event()
    rows = service.rows

    async def first_read_held_after_reading(pid: int) -> Row:
        row = await rows.get(pid)
        if not read_the_old_row.is_set():
            read_the_old_row.set()
            await release.wait()
        return row

    service.rows = TurnBatch(first_read_held_after_reading, None, lambda _: None)
    first = asyncio.create_task(service.product_reply(product_id))
    await read_the_old_row.wait()
    new_stock = await service.pg.fetchval(
        "UPDATE products SET stock = stock + 1 WHERE id = $1 RETURNING stock", product_id
    )
    await service.invalidate(product_id)
    second = asyncio.create_task(service.product_reply(product_id))
    release.set()
    old, new = await asyncio.gather(first, second)
    assert orjson.loads(old.body)["stock"] == new_stock - 1  # began before the write: may be old
    assert orjson.loads(new.body)["stock"] == new_stock
    assert orjson.loads((await service.product_reply(product_id)).body)["stock"] == new_stock
