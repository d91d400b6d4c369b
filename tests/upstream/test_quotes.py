"""GET /quotes/{symbol} against a real mock vendor: answers, validation, 504, 503, 502, cache, coalescing."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from harness.deadlines import deadline_s
from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tests.support.waiting import eventually
from tests.upstream.vendors import QuotesClient


async def test_a_quote_comes_from_the_vendor_in_our_shape(
    quotes_client: QuotesClient, mock: MockUpstreamProcess
) -> None:
    async with quotes_client() as client:
        response = await client.get("/quotes/BRK.B")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    quote = response.json()
    assert set(quote) == {"symbol", "price", "currency", "as_of_ms"}
    assert quote["symbol"] == "BRK.B"
    assert mock.stats(symbol="BRK.B")["symbol"]["quotes"] == 1


@pytest.mark.parametrize("symbol", ["aapl", "ABCDEFGHIJKLM", ".A", "%2E%2E", "A-B", "%20"])
async def test_malformed_symbols_get_422_naming_the_field_and_never_reach_the_vendor(
    quotes_client: QuotesClient, mock: MockUpstreamProcess, symbol: str
) -> None:
    async with quotes_client() as client:
        response = await client.get(f"/quotes/{symbol}")
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "path.symbol"
    assert mock.stats()["quotes"] == 0


async def test_a_vendor_slower_than_the_timeout_gives_504_on_time(
    quotes_client: QuotesClient, mock: MockUpstreamProcess
) -> None:
    mock.set_profile(p50_ms=3000, p99_ms=3000)
    async with quotes_client(timeout_s=0.3) as client:
        started = time.perf_counter()
        response = await client.get("/quotes/SLOW")
        elapsed = time.perf_counter() - started
        metrics = (await client.get("/metrics")).text
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    assert 0.25 < elapsed < 2.0
    assert "tenk_upstream_timeouts_total" in metrics
    assert 'tenk_upstream_call_duration_seconds_count{outcome="timeout"}' in metrics


async def test_a_full_bulkhead_gives_503_with_retry_after_at_once(
    quotes_client: QuotesClient, mock: MockUpstreamProcess
) -> None:
    mock.set_profile(p50_ms=1500, p99_ms=1500)
    async with quotes_client(max_inflight=3) as client:
        parked = [asyncio.create_task(client.get(f"/quotes/PARK{i}")) for i in range(3)]

        async def all_three_held() -> bool:
            return int((await asyncio.to_thread(mock.stats))["in_flight"]) >= 3

        await eventually(all_three_held, deadline_s(), "the vendor to hold the 3 parked requests", every=0.05)
        inflight_gauge = (await client.get("/metrics")).text
        started = time.perf_counter()
        rejected = await client.get("/quotes/ONEMORE")
        elapsed = time.perf_counter() - started
        answered = await asyncio.gather(*parked)
        metrics = (await client.get("/metrics")).text
    assert rejected.status_code == 503
    assert rejected.json()["error"]["code"] == "overloaded"
    assert int(rejected.headers["retry-after"]) >= 1
    assert elapsed < 0.5
    assert [r.status_code for r in answered] == [200, 200, 200]
    assert 'tenk_upstream_inflight{dependency="quotes"} 3.0' in inflight_gauge
    assert 'tenk_upstream_rejections_total{reason="bulkhead"}' in metrics
    assert mock.stats(symbol="ONEMORE")["symbol"]["quotes"] == 0


async def test_vendor_errors_and_unknown_symbols(quotes_client: QuotesClient, mock: MockUpstreamProcess) -> None:
    mock.set_profile(error_rate=1.0)
    async with quotes_client() as client:
        failed = await client.get("/quotes/ERR")
    assert failed.status_code == 502
    assert failed.json()["error"]["code"] == "upstream_error"


async def test_an_unreachable_vendor_gives_502_not_500(quotes_client: QuotesClient) -> None:
    async with quotes_client(url="http://127.0.0.1:9", connect_timeout_s=0.5) as client:
        response = await client.get("/quotes/AAPL")
    assert response.status_code == 502


async def test_1000_concurrent_callers_for_one_symbol_make_one_vendor_call(
    quotes_client: QuotesClient, mock: MockUpstreamProcess
) -> None:
    # The cache is off, so only coalescing can explain a single call.
    mock.set_profile(p50_ms=2000, p99_ms=2000)
    async with quotes_client(cache_ttl_s=0) as client:
        responses = await asyncio.gather(*(client.get("/quotes/COAL") for _ in range(1000)))
        metrics = (await client.get("/metrics")).text
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1
    assert mock.stats(symbol="COAL")["symbol"]["quotes"] == 1
    assert "tenk_upstream_coalesced_total" in metrics


async def test_the_cache_serves_a_symbol_for_its_ttl_then_asks_again(
    quotes_client: QuotesClient, mock: MockUpstreamProcess
) -> None:
    async with quotes_client(cache_ttl_s=0.3) as client:
        first = await client.get("/quotes/TTL")
        again = await client.get("/quotes/TTL")
        assert mock.stats(symbol="TTL")["symbol"]["quotes"] == 1
        await asyncio.sleep(0.4)
        later = await client.get("/quotes/TTL")
    assert first.content == again.content
    assert later.status_code == 200
    assert mock.stats(symbol="TTL")["symbol"]["quotes"] == 2


async def test_a_caller_that_hangs_up_does_not_cancel_the_call_others_wait_on(
    quotes_client: QuotesClient, mock: MockUpstreamProcess
) -> None:
    mock.set_profile(p50_ms=500, p99_ms=500)
    async with quotes_client(cache_ttl_s=0) as client:
        joined_before = await _coalesced(client)
        impatient = asyncio.create_task(client.get("/quotes/SHARE"))

        async def vendor_holds_the_call() -> bool:
            return int((await asyncio.to_thread(mock.stats))["in_flight"]) >= 1

        await eventually(vendor_holds_the_call, deadline_s(), "the vendor to hold the first caller's call", every=0.01)
        patient = asyncio.create_task(client.get("/quotes/SHARE"))

        async def patient_joined() -> bool:
            return await _coalesced(client) > joined_before

        await eventually(patient_joined, deadline_s(), "the second caller to join the call in flight", every=0.01)
        impatient.cancel()
        response = await patient
    assert response.status_code == 200
    assert mock.stats(symbol="SHARE")["symbol"]["quotes"] == 1


async def _coalesced(client: httpx.AsyncClient) -> float:
    """How many callers have joined a call already in flight (the counter is the process's, so compare)."""
    metrics = (await client.get("/metrics")).text
    found = re.search(r"^tenk_upstream_coalesced_total (\S+)$", metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0
