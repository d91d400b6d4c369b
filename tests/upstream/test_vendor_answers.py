"""What a vendor may send that a quote must not pass on: made-up symbols, prices JSON cannot hold, huge bodies."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx

from harness.stack import Stack
from tenk.settings import Settings
from tests.upstream.vendors import OddVendor


async def test_an_unknown_symbol_is_asked_of_the_vendor_once_per_not_found_ttl(
    stack: Stack,
    odd_vendor: OddVendor,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    async with app_client_factory(stack.settings(upstream={"url": odd_vendor.url, "not_found_ttl_s": 60})) as client:
        answers = [await client.get("/quotes/NOPE") for _ in range(20)]
        assert {a.status_code for a in answers} == {404}
        assert answers[-1].json()["error"]["fields"][0]["field"] == "path.symbol"
        assert odd_vendor.calls["NOPE"] == 1
        # Known symbols are unaffected, and cached apart.
        assert (await client.get("/quotes/OK")).json()["price"] == 1.5


async def test_a_vendor_body_past_the_cap_is_a_vendor_failure_not_read_whole(
    stack: Stack,
    odd_vendor: OddVendor,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    async with app_client_factory(stack.settings(upstream={"url": odd_vendor.url})) as client:
        before = await _oversized(client)
        response = await client.get("/quotes/BIG")
        assert response.status_code == 502, response.text
        assert response.json()["error"]["code"] == "upstream_error"
        assert await _oversized(client) == before + 1


async def _oversized(client: httpx.AsyncClient) -> float:
    metrics = (await client.get("/metrics")).text
    found = re.search(r"^tenk_upstream_oversized_total (\S+)$", metrics, re.MULTILINE)
    assert found is not None, "the oversized counter is not exported"
    return float(found.group(1))


async def test_a_price_json_cannot_hold_is_a_vendor_error_not_null(
    stack: Stack,
    odd_vendor: OddVendor,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    async with app_client_factory(stack.settings(upstream={"url": odd_vendor.url})) as client:
        for symbol in ("NAN", "INF", "HUGE"):
            response = await client.get(f"/quotes/{symbol}")
            assert response.status_code == 502, (symbol, response.text)
            assert response.json()["error"]["code"] == "upstream_error"
