"""Reads of ids that name no product: a flood of them costs no read each and leaves the hot set cached."""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx

from harness.clients import AUTH
from harness.stack import Stack
from tenk.catalog.service import CatalogService
from tenk.catalog.settings import CatalogSettings
from tenk.settings import Settings

HOT = range(1, 51)
# TTLs far longer than the test, so that a hot entry can leave the LRU only by eviction.
SMALL_LRU = CatalogSettings(local_max_items=200, local_ttl_s=3600, negative_ttl_s=3600)


async def _warm(service: CatalogService) -> None:
    for product_id in HOT:
        assert (await service.product_reply(product_id)).status == 200


async def _hot_set_hit_rate(service: CatalogService, flood: Callable[[], int], rounds: int, per_round: int) -> float:
    """Share of hot-set reads answered from the process LRU, each round after `per_round` flood reads."""
    hits = reads = 0
    for _ in range(rounds):
        for _ in range(per_round):
            assert (await service.product_reply(flood())).status == 404
        for product_id in HOT:
            hits += service.local.get(product_id) is not None
            reads += 1
            await service.product_reply(product_id)
    return hits / reads


async def test_a_flood_of_random_ids_keeps_the_hot_set_cached_and_reads_no_product(
    counted_service: tuple[CatalogService, list[str]],
) -> None:
    shared, statements = counted_service
    service = CatalogService(shared.pg, shared.redis, SMALL_LRU)
    draw = random.Random(23)
    await _warm(service)
    statements.clear()
    # Ids anywhere in the id space, as a scanner sends them: nearly all past the catalogue.
    rate = await _hot_set_hit_rate(service, lambda: draw.randrange(1_000_000, 2**63), rounds=10, per_round=250)
    assert rate == 1.0, f"hot-set hit rate {rate:.3f}"
    assert not [q for q in statements if "FROM products WHERE id" in q], "a flood id was read from Postgres"
    assert service.ceiling.reads == 1


async def test_missing_ids_within_the_range_do_not_evict_the_hot_set(
    counted_service: tuple[CatalogService, list[str]],
) -> None:
    shared, _ = counted_service
    service = CatalogService(shared.pg, shared.redis, SMALL_LRU)
    service.ceiling.raise_to(2**63 - 1)  # as if every id were in range: each is read, found missing, remembered
    draw = random.Random(24)
    await _warm(service)
    rate = await _hot_set_hit_rate(service, lambda: draw.randrange(10**12, 2**63), rounds=3, per_round=250)
    assert rate == 1.0, f"hot-set hit rate {rate:.3f}"


async def test_a_product_created_in_another_process_is_readable_at_once_though_past_the_ceiling(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    # Long negative TTL: only the creator's invalidation can make the reader see the new id in time.
    settings = stack.settings(catalog={"negative_ttl_s": 3600, "invalidation_ack_timeout_s": 5})
    async with app_client_factory(settings) as writer, app_client_factory(settings) as reader:
        assert (await reader.get("/products/9000000000000")).status_code == 404  # the ceiling is read
        product = {"sku": f"T-CEILING-{random.randrange(10**9)}", "name": "Past the ceiling", "price_cents": 1}
        created = await writer.post("/products", json=product, headers=AUTH)
        assert created.status_code == 201, created.text
        read = await reader.get(f"/products/{created.json()['id']}")
        assert read.status_code == 200, read.text
