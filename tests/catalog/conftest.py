"""A catalog service over the shared stack whose Postgres statements the test can count."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from redis.asyncio import Redis

from harness.stack import Stack
from tenk.catalog.service import CatalogService
from tenk.catalog.settings import CatalogSettings


@pytest.fixture
async def counted_service(stack: Stack) -> AsyncIterator[tuple[CatalogService, list[str]]]:
    """A catalog service whose every Postgres statement is recorded by the driver."""
    statements: list[str] = []

    async def record_queries(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda record: statements.append(record.query))

    pool = await asyncpg.create_pool(stack.pg.url, min_size=4, max_size=16, init=record_queries)
    redis = Redis.from_url(stack.redis.url)
    try:
        yield CatalogService(pool, redis, CatalogSettings()), statements
    finally:
        await pool.close()
        await redis.aclose()
