"""A real mock-upstream process, and in-process tenk apps pointed at it with chosen upstream knobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx
import pytest

from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tenk.settings import Settings
from tests.conftest import Stack

QuotesClient = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def quotes_client(
    stack: Stack,
    mock: MockUpstreamProcess,
    app_client_factory: Callable[[Settings], AsyncIterator[httpx.AsyncClient]],
) -> QuotesClient:
    """`async with quotes_client(timeout_s=0.2) as client:` an app whose upstream settings are set so."""

    @asynccontextmanager
    async def open_client(**upstream: object) -> AsyncIterator[httpx.AsyncClient]:
        async for client in app_client_factory(stack.settings(upstream={"url": mock.url, **upstream})):
            yield client

    return open_client


async def wait_until_parked(mock: MockUpstreamProcess, count: int, timeout_s: float = 10.0) -> int:
    """Wait until the vendor holds at least `count` requests; return how many it holds."""
    held = 0
    for _ in range(int(timeout_s / 0.05)):
        held = (await asyncio.to_thread(mock.stats))["in_flight"]
        if held >= count:
            return int(held)
        await asyncio.sleep(0.05)
    raise AssertionError(f"the vendor holds {held} requests, not {count}, after {timeout_s}s")
