"""The shared Postgres pool (`tenk.connections.create_pg_pool`): what releasing a connection costs, and
what it still undoes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tenk.connections import create_pg_pool
from tests.support.stack import Stack


@pytest.fixture
async def one_connection_pool(stack: Stack) -> AsyncIterator[asyncpg.Pool]:
    # One connection, so that every acquire hands back the connection the last release returned.
    pool = await create_pg_pool(stack.settings(database={"pool_min": 1, "pool_max": 1}))
    try:
        yield pool
    finally:
        await pool.close()


async def test_handing_a_connection_back_to_the_pool_sends_postgres_nothing(one_connection_pool: asyncpg.Pool) -> None:
    sent: list[str] = []

    def log(logged: asyncpg.connection.LoggedQuery) -> None:
        sent.append(logged.query)

    async with one_connection_pool.acquire() as conn:
        conn.add_query_logger(log)
        await conn.fetchval("SELECT 1")
    async with one_connection_pool.acquire() as conn:
        conn.remove_query_logger(log)
    # The query itself, and no reset statement sent on release (asyncpg's default sends four).
    assert sent == ["SELECT 1"]


async def test_a_transaction_left_open_is_rolled_back_when_the_connection_goes_back(
    one_connection_pool: asyncpg.Pool,
) -> None:
    async with one_connection_pool.acquire() as conn:
        await conn.execute("BEGIN")
        await conn.execute("SET LOCAL statement_timeout = 1234")
    async with one_connection_pool.acquire() as conn:
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SHOW statement_timeout") != "1234ms"
