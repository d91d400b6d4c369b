"""Fixtures of the quotes tests: in-process tenk apps pointed at a real mock-upstream process with chosen
upstream knobs, and a vendor with odd answers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx
import pytest

from harness.stack import Stack
from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tenk.settings import Settings
from tests.upstream.vendors import OddVendor, QuotesClient


@pytest.fixture
def quotes_client(
    stack: Stack,
    mock: MockUpstreamProcess,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> QuotesClient:
    """`async with quotes_client(timeout_s=0.2) as client:` an app whose upstream settings are set so."""

    @asynccontextmanager
    async def open_client(**upstream: object) -> AsyncIterator[httpx.AsyncClient]:
        async with app_client_factory(stack.settings(upstream={"url": mock.url, **upstream})) as client:
            yield client

    return open_client


@pytest.fixture
async def odd_vendor() -> AsyncIterator[OddVendor]:
    vendor = OddVendor()
    await vendor.start()
    yield vendor
    await vendor.close()
