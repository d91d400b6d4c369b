from __future__ import annotations

import asyncio

import asyncpg

from tenk.search.service import SearchService
from tenk.search.settings import SearchSettings
from tests.conftest import Stack


async def _counted_pool(stack: Stack, statements: list[str]) -> asyncpg.Pool:
    async def record(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda record: statements.append(record.query))

    pool: asyncpg.Pool = await asyncpg.create_pool(stack.pg.url, min_size=2, max_size=8, init=record)
    return pool


async def test_identical_concurrent_searches_share_one_query_and_then_hit_the_cache(stack: Stack) -> None:
    statements: list[str] = []
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings())
        pages = await asyncio.gather(*(service.search("lamp", 10) for _ in range(50)))
        assert len(set(pages)) == 1
        await service.search("lamp", 10)
        assert len([q for q in statements if "websearch_to_tsquery" in q]) == 1
        await service.search("lamp", 11)  # another page size is another entry
        assert len([q for q in statements if "websearch_to_tsquery" in q]) == 2
    finally:
        await pool.close()


async def test_with_the_cache_off_every_search_reaches_postgres(stack: Stack) -> None:
    statements: list[str] = []
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings(cache=False))
        for _ in range(3):
            await service.search("kettle", 5)
        assert len([q for q in statements if "websearch_to_tsquery" in q]) == 3
    finally:
        await pool.close()
