"""The shared Postgres pool (`tenk.platform.connections.create_pg_pool`, a `tenk.platform.pg_pool.PromptPool`): what
releasing a connection costs, and what it still undoes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest

from harness.stack import Stack
from tenk.platform.connections import create_pg_pool, create_redis


@asynccontextmanager
async def _pool_of(stack: Stack, size: int) -> AsyncIterator[asyncpg.Pool]:
    # PromptPool's own tests: the fast path, whatever the suite runs with (make test-stock).
    settings = stack.settings()
    pool = await create_pg_pool(settings.resolved_database_url, min_size=size, max_size=size, stock_paths=False)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
async def one_connection_pool(stack: Stack) -> AsyncIterator[asyncpg.Pool]:
    # One connection, so that every acquire hands back the connection the last release returned.
    async with _pool_of(stack, 1) as pool:
        yield pool


async def test_handing_a_connection_back_to_the_pool_sends_postgres_nothing(one_connection_pool: asyncpg.Pool) -> None:
    sent: list[str] = []

    def log(logged: asyncpg.connection.LoggedQuery) -> None:
        sent.append(logged.query)

    async with one_connection_pool.acquire() as conn:
        conn.add_query_logger(log)
        await conn.fetchval("SELECT 1")
    async with one_connection_pool.acquire() as conn:
        conn.remove_query_logger(log)
    await asyncio.sleep(0)  # one turn of the loop: asyncpg calls query loggers with call_soon
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


@pytest.fixture
async def two_connection_pool(stack: Stack) -> AsyncIterator[asyncpg.Pool]:
    async with _pool_of(stack, 2) as pool:
        yield pool


async def test_a_clean_connection_goes_back_without_a_task_of_its_own(one_connection_pool: asyncpg.Pool) -> None:
    # asyncpg's own release shields the hand-back in a task; a clean connection needs none (tenk.platform.pg_pool).
    loop = asyncio.get_running_loop()
    created: list[str] = []

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        created.append(getattr(coro, "__qualname__", repr(coro)))
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(counting)
    try:
        assert await one_connection_pool.fetchval("SELECT 1") == 1
        assert await one_connection_pool.fetchval("SELECT 2") == 2
    finally:
        loop.set_task_factory(None)
    assert created == []


async def test_listeners_left_on_a_connection_are_dropped_when_it_goes_back(
    one_connection_pool: asyncpg.Pool,
) -> None:
    heard: list[str] = []
    async with one_connection_pool.acquire() as conn:
        conn.add_log_listener(lambda _, message: heard.append(message.message))
        await conn.execute("DO $$ BEGIN RAISE NOTICE 'while acquired'; END $$")
        with pytest.warns(asyncpg.exceptions.InterfaceWarning, match="log listener"):
            await one_connection_pool.release(conn)
    async with one_connection_pool.acquire() as conn:
        await conn.execute("DO $$ BEGIN RAISE NOTICE 'after the release'; END $$")
    await asyncio.sleep(0)  # one turn of the loop: asyncpg calls log listeners with call_soon
    assert heard == ["while acquired"]


async def test_a_caller_cancelled_mid_query_leaves_the_pool_serving(one_connection_pool: asyncpg.Pool) -> None:
    # Cancelled mid-query, the connection goes back through asyncpg's own (shielded) path, which waits for
    # Postgres to cancel the query: the pool's only connection then serves the next caller at once.
    acquired = asyncio.Event()

    async def sleeper() -> None:
        async with one_connection_pool.acquire() as conn:
            acquired.set()
            await conn.fetchval("SELECT pg_sleep(600)")

    task = asyncio.create_task(sleeper())
    await acquired.wait()  # by now the sleeper's query is sent: it ran on until fetchval awaited
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with asyncio.timeout(120):  # far under the 600 s a query left running would hold the connection
        assert await one_connection_pool.fetchval("SELECT 3") == 3


async def test_connections_expired_by_the_pool_are_replaced_when_they_go_back(
    one_connection_pool: asyncpg.Pool,
) -> None:
    first = await one_connection_pool.fetchval("SELECT pg_backend_pid()")
    async with one_connection_pool.acquire() as conn:
        await one_connection_pool.expire_connections()
        assert await conn.fetchval("SELECT pg_backend_pid()") == first
        expired = conn._con  # the connection behind the proxy, which the release detaches
    assert expired.is_closed()  # closed as it went back, not left idle in the pool
    assert await one_connection_pool.fetchval("SELECT pg_backend_pid()") != first


async def test_callers_queued_for_a_connection_are_each_served_as_connections_go_back(
    two_connection_pool: asyncpg.Pool,
) -> None:
    answers = await asyncio.gather(*(two_connection_pool.fetchval("SELECT $1::int", n) for n in range(200)))
    assert answers == list(range(200))
    assert two_connection_pool.get_idle_size() == 2


async def test_a_caller_waiting_for_a_connection_is_served_before_one_that_asks_after_the_release(
    one_connection_pool: asyncpg.Pool,
) -> None:
    # asyncio.Queue hands a non-empty queue to whoever asks: a connection requeued within the releasing
    # caller's own turn would go to a caller asking in that turn, ahead of one already waiting.
    served: list[str] = []
    held = await one_connection_pool.acquire()

    async def waiting() -> None:
        async with one_connection_pool.acquire():
            served.append("waiting")

    waiter = asyncio.create_task(waiting())
    await asyncio.sleep(0)  # one turn of the loop, deterministic: the new task runs until it waits in line
    await one_connection_pool.release(held)
    async with one_connection_pool.acquire():
        served.append("asked after the release")
    await waiter
    assert served == ["waiting", "asked after the release"]


async def test_a_builder_opens_the_pools_from_a_url_and_plain_arguments(stack: Stack) -> None:
    # No settings tree: what an app of one's own, with settings of its own, has to hand.
    urls = stack.settings()
    pool = await create_pg_pool(urls.resolved_database_url, min_size=1, max_size=3, timeout_s=1.5)
    redis = create_redis(urls.resolved_redis_url, max_connections=7, timeout_s=0.5)
    try:
        assert (pool.get_min_size(), pool.get_max_size()) == (1, 3)
        assert await pool.fetchval("SELECT current_setting('timezone')") == "UTC"
        redis_pool = redis.connection_pool
        assert (redis_pool.max_connections, redis_pool.connection_kwargs["socket_timeout"]) == (7, 0.5)
        assert await redis.ping()
    finally:
        await pool.close()
        await redis.aclose()
