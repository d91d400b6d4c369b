"""Product reads that miss the process's cache in one event-loop turn, while another is in flight, reach
Postgres as one query, and Redis as one MGET; a read alone is the one-product query or command it always
was; a failed batch fails each of its reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from harness.stack import Stack
from tenk.catalog import queries
from tenk.catalog.service import PRODUCTS
from tenk.platform.connections import create_redis, redis_options
from tenk.platform.readthrough import Row
from tenk.platform.readthrough._reads import Lookup
from tenk.platform.readthrough._reads import batched_lookups as lookups_of
from tenk.platform.readthrough._reads import batched_rows as rows_of
from tenk.platform.turn_batch import TurnBatch
from tenk.settings import Settings
from tests.catalog import keys

CONCURRENT = 50


def batched_rows(pool: asyncpg.Pool) -> TurnBatch[int, Row]:
    """Product rows by id, batched per event-loop turn as the catalog's cache reads them."""
    return rows_of(pool, PRODUCTS.load_one, PRODUCTS.load_many, PRODUCTS.metrics.db_batch_size.observe)


def batched_lookups(redis: Redis) -> TurnBatch[int, Lookup]:
    """Product lookups in Redis, batched per event-loop turn as the catalog's cache makes them."""
    return lookups_of(redis, PRODUCTS.keys, PRODUCTS.metrics.redis_batch_size.observe)


def _batches(to: str = "db") -> tuple[float, float]:
    """(batches sent, reads in them) so far, in this process, to Postgres ("db") or Redis ("redis")."""
    count = REGISTRY.get_sample_value(f"tenk_catalog_{to}_batch_size_count") or 0.0
    total = REGISTRY.get_sample_value(f"tenk_catalog_{to}_batch_size_sum") or 0.0
    return count, total


@pytest.fixture
async def pool(stack: Stack) -> AsyncIterator[asyncpg.Pool]:
    async with asyncpg.create_pool(stack.pg.url, min_size=1, max_size=4) as created:
        yield created


async def test_reads_of_one_turn_are_one_query_and_each_gets_its_own_row(pool: asyncpg.Pool) -> None:
    reads = batched_rows(pool)
    ids = [*range(1, CONCURRENT), 10**12]  # the last one is no product
    before = _batches()
    answers = await asyncio.gather(*(reads.get(product_id) for product_id in ids))
    after = _batches()
    # The first goes alone, with nothing in flight (lone reads are not observed); it is in flight when
    # the others start, and they go together.
    assert (after[0] - before[0], after[1] - before[1]) == (1, CONCURRENT - 1)
    for product_id, answer in zip(ids, answers, strict=True):
        assert answer == await pool.fetchval(queries.PRODUCT_BY_ID, product_id)
    assert answers[-1] is None


async def test_a_read_alone_goes_out_at_once_as_the_one_row_query(pool: asyncpg.Pool) -> None:
    reads = batched_rows(pool)
    before = _batches()
    assert await reads.get(7) == await pool.fetchval(queries.PRODUCT_BY_ID, 7)
    assert _batches() == before


async def test_a_failed_batch_fails_each_of_its_reads(pool: asyncpg.Pool) -> None:
    reads = batched_rows(pool)
    await pool.close()
    results = await asyncio.gather(*(reads.get(n) for n in (1, 2, 3)), return_exceptions=True)
    assert all(isinstance(result, asyncpg.InterfaceError) for result in results), results


async def test_concurrent_uncached_requests_share_postgres_queries(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    settings = stack.settings(catalog={"local_cache": False, "redis_cache": False})
    async with app_client_factory(settings) as client:
        before = _batches()
        responses = await asyncio.gather(*(client.get(f"/products/{n}") for n in range(1, CONCURRENT + 1)))
        after = _batches()
    assert [response.status_code for response in responses] == [200] * CONCURRENT
    assert [response.json()["id"] for response in responses] == list(range(1, CONCURRENT + 1))
    # Most of them together: at most a few lone reads and a few batches.
    assert after[1] - before[1] > CONCURRENT / 2, f"{after[1] - before[1]:.0f} of {CONCURRENT} reads batched"
    assert after[0] - before[0] < CONCURRENT / 4, f"{after[0] - before[0]:.0f} batches for {CONCURRENT} reads"


@pytest.fixture
async def redis(stack: Stack) -> AsyncIterator[Redis]:
    settings = stack.settings()
    client = create_redis(settings.resolved_redis_url, **redis_options(settings))
    try:
        yield client
    finally:
        await client.aclose()


async def test_lookups_of_one_turn_are_one_mget_and_each_gets_its_own_keys(redis: Redis) -> None:
    ids = list(range(900_001, 900_001 + CONCURRENT))
    for product_id in ids[::2]:
        await redis.set(keys.product_key(product_id), f"product {product_id}".encode(), ex=60)
        await redis.set(keys.generation_key(product_id), str(product_id % 7).encode(), ex=60)
    lookups = batched_lookups(redis)
    before = _batches("redis")
    answers = await asyncio.gather(*(lookups.get(product_id) for product_id in ids))
    after = _batches("redis")
    assert (after[0] - before[0], after[1] - before[1]) == (1, CONCURRENT - 1)
    for product_id, answer in zip(ids, answers, strict=True):
        alone = await redis.mget(
            keys.product_key(product_id), keys.generation_key(product_id), keys.written_lsn_key(product_id)
        )
        assert answer == alone
    assert answers[0] == [b"product 900001", str(900_001 % 7).encode(), None]
    assert answers[1] == [None, None, None]


async def test_a_lookup_alone_goes_out_at_once_as_its_own_mget(redis: Redis) -> None:
    lookups = batched_lookups(redis)
    before = _batches("redis")
    assert await lookups.get(900_001) == await redis.mget(
        keys.product_key(900_001), keys.generation_key(900_001), keys.written_lsn_key(900_001)
    )
    assert _batches("redis") == before


async def test_concurrent_redis_hits_share_mgets(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    settings = stack.settings(catalog={"local_cache": False})
    async with app_client_factory(settings) as client:
        # Cached in Redis first, one at a time.
        for n in range(1, CONCURRENT + 1):
            assert (await client.get(f"/products/{n}")).status_code == 200
        before = _batches("redis")
        responses = await asyncio.gather(*(client.get(f"/products/{n}") for n in range(1, CONCURRENT + 1)))
        after = _batches("redis")
    assert [response.status_code for response in responses] == [200] * CONCURRENT
    assert [response.json()["id"] for response in responses] == list(range(1, CONCURRENT + 1))
    assert after[1] - before[1] > CONCURRENT / 2, f"{after[1] - before[1]:.0f} of {CONCURRENT} lookups batched"
    assert after[0] - before[0] < CONCURRENT / 4, f"{after[0] - before[0]:.0f} batches for {CONCURRENT} lookups"
