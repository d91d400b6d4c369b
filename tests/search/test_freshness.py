"""A search page outlives its TTL only while no product changes: a product written by the API, or
straight into Postgres by another client, shows up in a cached page within the TTL.

The real app, lifespan and invalidation listener included, on the shared Postgres and Redis. The quiet
TTL is set far past the wait, so a page that was not put back on its TTL would keep the old answer.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import asyncpg
import httpx
import pytest

from harness.clients import AUTH
from harness.stack import Stack
from tenk.settings import Settings
from tests.support.waiting import eventually

# Far past the wait below: the page can only be reloaded in time if the write put it back on its TTL.
QUIET_TTL_S = 3_600.0
WAIT_S = 60.0

AppFactory = Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
Writer = Callable[[httpx.AsyncClient, Stack, str], Awaitable[str]]


def _word() -> str:
    """A word no product has: letters only, so it is one search word."""
    return "zq" + "".join(chr(ord("a") + b % 26) for b in secrets.token_bytes(10))


async def _cached_empty_page(client: httpx.AsyncClient, word: str) -> None:
    for _ in range(3):  # the second sighting is loaded and kept; the third is served from it
        page = await client.get("/search", params={"q": word})
        assert page.status_code == 200
        assert page.json()["items"] == []


async def _skus_found(client: httpx.AsyncClient, word: str) -> list[str]:
    page = await client.get("/search", params={"q": word})
    return [item["sku"] for item in page.json()["items"]]


def _settings(stack: Stack) -> Settings:
    return stack.settings(search={"cache_ttl_s": 0.5, "cache_quiet_ttl_s": QUIET_TTL_S})


async def _through_the_api(client: httpx.AsyncClient, stack: Stack, word: str) -> str:
    sku = f"API-{word}"
    product = {"sku": sku, "name": f"{word} kettle", "price_cents": 100}
    assert (await client.post("/products", json=product, headers=AUTH)).status_code == 201
    return sku


async def _straight_into_postgres(client: httpx.AsyncClient, stack: Stack, word: str) -> str:
    # Another client, not the API: the outbox trigger records it, and a replay announces it.
    conn = await asyncpg.connect(stack.pg.url)
    try:
        sku = f"PSQL-{word}"
        await conn.execute("INSERT INTO products (sku, name, price_cents) VALUES ($1, $2, 100)", sku, f"{word} lamp")
        return sku
    finally:
        await conn.close()


@pytest.mark.parametrize("write", [_through_the_api, _straight_into_postgres])
async def test_a_product_written_shows_up_in_a_cached_page_within_the_ttl(
    stack: Stack, app_client_factory: AppFactory, write: Writer
) -> None:
    word = _word()
    async with app_client_factory(_settings(stack)) as client:
        await _cached_empty_page(client, word)
        sku = await write(client, stack, word)
        found = await eventually(lambda: _skus_found(client, word), WAIT_S, "the new product in the cached search")
        assert found == [sku]
