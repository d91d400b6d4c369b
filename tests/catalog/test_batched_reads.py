"""Product reads that miss every cache in one event-loop turn, while another is in flight, reach Postgres
as one query; a read alone is the one-row query it always was; a failed batch fails each of its reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from tenk.catalog import queries
from tenk.catalog.batched_reads import BatchedReads
from tenk.settings import Settings
from tests.support.stack import Stack

CONCURRENT = 50


def _batches() -> tuple[float, float]:
    """(batches sent, reads in them) so far, in this process."""
    count = REGISTRY.get_sample_value("tenk_catalog_db_batch_size_count") or 0.0
    total = REGISTRY.get_sample_value("tenk_catalog_db_batch_size_sum") or 0.0
    return count, total


@pytest.fixture
async def pool(stack: Stack) -> AsyncIterator[asyncpg.Pool]:
    async with asyncpg.create_pool(stack.pg.url, min_size=1, max_size=4) as created:
        yield created


async def test_reads_of_one_turn_are_one_query_and_each_gets_its_own_row(pool: asyncpg.Pool) -> None:
    reads = BatchedReads(pool)
    ids = [*range(1, CONCURRENT), 10**12]  # the last one is no product
    before = _batches()
    answers = await asyncio.gather(*(reads.product_json(product_id) for product_id in ids))
    after = _batches()
    # The first goes alone, with nothing in flight (lone reads are not observed); it is in flight when
    # the others start, and they go together.
    assert (after[0] - before[0], after[1] - before[1]) == (1, CONCURRENT - 1)
    for product_id, answer in zip(ids, answers, strict=True):
        assert answer == await pool.fetchval(queries.PRODUCT_BY_ID, product_id)
    assert answers[-1] is None


async def test_a_read_alone_goes_out_at_once_as_the_one_row_query(pool: asyncpg.Pool) -> None:
    reads = BatchedReads(pool)
    before = _batches()
    assert await reads.product_json(7) == await pool.fetchval(queries.PRODUCT_BY_ID, 7)
    assert _batches() == before


async def test_a_failed_batch_fails_each_of_its_reads(pool: asyncpg.Pool) -> None:
    reads = BatchedReads(pool)
    await pool.close()
    results = await asyncio.gather(*(reads.product_json(n) for n in (1, 2, 3)), return_exceptions=True)
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
