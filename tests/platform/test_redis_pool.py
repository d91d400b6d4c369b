"""The API's Redis pool (`tenk.platform.redis_pool`): a free connection is handed over directly, and everything the
base class guarantees still holds: the queue's order and timeout, and a write that cannot finish still
times out."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from harness.stack import Stack
from tenk.platform.redis_pool import PromptConnectionPool
from tenk.stack import EmbeddedRedis
from tenk.stack._ports import start_on_free_port


def _pool(url: str, *, connections: int, timeout_s: float) -> PromptConnectionPool:
    return PromptConnectionPool.from_url(
        url, max_connections=connections, timeout=timeout_s, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )


@pytest.fixture
async def one_connection(stack: Stack) -> AsyncIterator[PromptConnectionPool]:
    pool = _pool(stack.redis.url, connections=1, timeout_s=30.0)
    try:
        yield pool
    finally:
        await pool.aclose()


async def test_commands_in_turn_share_one_connection(one_connection: PromptConnectionPool) -> None:
    client, pool = Redis(connection_pool=one_connection), one_connection
    for n in range(20):
        await client.set("tenk:test:pool", n)
        assert await client.get("tenk:test:pool") == str(n).encode()
    assert len(pool._available_connections) == 1
    assert not pool._in_use_connections


async def test_callers_queued_for_a_connection_are_served_in_their_order(one_connection: PromptConnectionPool) -> None:
    client, pool = Redis(connection_pool=one_connection), one_connection
    held = await pool.get_connection()
    served: list[str] = []

    async def command(name: str) -> None:
        await client.incr("tenk:test:pool:queue")
        served.append(name)

    first = asyncio.create_task(command("queued"))
    # The caller is in the queue once the pool counts it there: a few turns of the loop, never a timed sleep.
    for _ in range(1000):
        if pool._queued:
            break
        await asyncio.sleep(0)
    assert pool._queued == 1
    await pool.release(held)
    # The connection is free now, but the queued caller has not run yet: a newcomer must not take it.
    second = asyncio.create_task(command("newcomer"))
    await asyncio.gather(first, second)
    assert served == ["queued", "newcomer"]


async def test_a_caller_finding_every_connection_taken_gives_up_after_the_pool_timeout(stack: Stack) -> None:
    pool = _pool(stack.redis.url, connections=1, timeout_s=0.2)
    client = Redis(connection_pool=pool)
    try:
        held = await pool.get_connection()
        with pytest.raises(RedisConnectionError, match="No connection available"):
            await client.get("tenk:test:pool")
        await pool.release(held)
        # Nobody is left counted as queued, and the connection is back where the next caller finds it.
        assert not pool._queued
        await client.set("tenk:test:pool:after", b"1")
        assert await client.get("tenk:test:pool:after") == b"1"
    finally:
        await client.aclose(close_connection_pool=True)


@pytest.fixture
def stoppable_redis(stack_root: Path) -> Iterator[EmbeddedRedis]:
    server = start_on_free_port(lambda port: EmbeddedRedis(stack_root / "redis", port))
    try:
        yield server
    finally:
        pid = server.pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        server.stop()


async def test_a_write_the_server_does_not_take_times_out(stoppable_redis: EmbeddedRedis) -> None:
    # Long enough for a loaded machine to connect and answer the PING; the stopped server never answers.
    timeout_s = 2.0
    client = Redis(connection_pool=_pool(stoppable_redis.url, connections=1, timeout_s=timeout_s))
    try:
        await client.ping()
        pid = stoppable_redis.pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        # Far more than the kernel's socket buffers hold, so the transport keeps the rest and must wait.
        value = b"x" * (64 << 20)
        # The bound only keeps a broken pool from hanging the suite; the write must fail on its own.
        async with asyncio.timeout(60):
            with pytest.raises(RedisTimeoutError, match="writing"):
                await client.set("tenk:test:pool:big", value)
    finally:
        await client.aclose(close_connection_pool=True)
