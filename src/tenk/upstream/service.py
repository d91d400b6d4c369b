"""Quotes from a third-party vendor that may be slow or down, without letting it take the API down.

A request for a symbol goes: memory (TTL cache; symbols the vendor does not know in a cache of their
own, so a flood of made-up symbols neither calls the vendor for each repeat nor evicts the quotes
people read) -> a call already in flight for the same symbol (single-flight) -> the breaker (fail fast
while the vendor is known bad) -> the bulkhead (a hard cap on calls in flight; full means 503 now,
never a queue) -> one shared aiohttp session with a bounded pool and a whole-call timeout (504).
What the vendor sends is bounded (`max_body_bytes`) and re-issued only when it is a quote we can
state exactly (a finite price); anything else is the vendor failing (502).

aiohttp rather than httpx: httpx's AsyncClient loses much of its throughput under concurrency
(encode/httpx#3215, still open), and concurrency is the whole point here.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import orjson
from fastapi import FastAPI
from prometheus_client import Histogram
from yarl import URL

from tenk.platform import (
    BreakerCall,
    Bulkhead,
    BulkheadFullError,
    CircuitBreaker,
    CircuitOpenError,
    NotFoundError,
    SingleFlight,
    TtlCache,
    UpstreamTimeoutError,
    live_gauges,
)
from tenk.upstream import metrics
from tenk.upstream.errors import UpstreamError
from tenk.upstream.settings import UpstreamSettings


class QuoteService:
    def __init__(self, session: aiohttp.ClientSession, settings: UpstreamSettings) -> None:
        self.session = session
        self.settings = settings
        self._quotes_url = settings.base_url + "/v1/quotes/"
        self.cache: TtlCache[str, bytes] = TtlCache(settings.cache_max_items, settings.cache_ttl_s)
        self.unknown: TtlCache[str, bytes] = TtlCache(settings.cache_max_items, settings.not_found_ttl_s)
        self.flights: SingleFlight[str, bytes] = SingleFlight()
        self.bulkhead = Bulkhead("upstream", settings.max_inflight)
        self.breaker = CircuitBreaker(
            "upstream",
            failure_ratio=settings.breaker_failure_ratio,
            window_s=settings.breaker_window_s,
            min_calls=settings.breaker_min_calls,
            open_s=settings.breaker_open_s,
        )

    async def get_quote_json(self, symbol: str) -> bytes:
        """The quote's JSON bytes. Hot path: a cache hit returns before any await."""
        cached = self.cache.get(symbol)
        if cached is not None:
            metrics.CACHE_HIT.inc()
            return cached
        if self.unknown.get(symbol) is not None:
            metrics.NOT_FOUND_HIT.inc()
            raise _not_found()
        metrics.CACHE_MISS.inc()
        if symbol in self.flights:
            metrics.COALESCED.inc()
        # The call runs in its own task: a caller hanging up does not cancel it for the others.
        return await self.flights.do(symbol, lambda: self._load(symbol))

    async def _load(self, symbol: str) -> bytes:
        # Verdicts are given explicitly in `_call`; any other way out of the block (a full bulkhead, which
        # never reached the vendor, cancellation, a bug) hands the permit back unjudged.
        call = self.breaker.call(is_failure=_judged_in_call)
        if call is None:
            metrics.REJECTED_BREAKER.inc()
            raise CircuitOpenError(self.breaker.name, self.breaker.retry_after_s())
        try:
            with call:
                async with self.bulkhead.slot():
                    body = await self._call(symbol, call)
        except BulkheadFullError:
            metrics.REJECTED_BULKHEAD.inc()
            raise
        self.cache.put(symbol, body)
        return body

    async def _call(self, symbol: str, call: BreakerCall) -> bytes:
        started = time.perf_counter()
        try:
            # The symbol was validated to [A-Z0-9.], so the URL needs no quoting.
            async with self.session.get(URL(self._quotes_url + symbol, encoded=True)) as response:
                status = response.status
                raw = await _read_at_most(response, self.settings.max_body_bytes)
        except TimeoutError:
            self._failed(metrics.LATENCY_TIMEOUT, started, call)
            metrics.TIMEOUTS.inc()
            raise UpstreamTimeoutError(
                f"the quotes vendor did not answer within {self.settings.timeout_s:g}s"
            ) from None
        except (aiohttp.ClientError, OSError):
            self._failed(metrics.LATENCY_UNREACHABLE, started, call)
            raise UpstreamError("the quotes vendor is unreachable", retry_after_s=1.0) from None
        if raw is None:
            self._failed(metrics.LATENCY_ERROR, started, call)
            metrics.OVERSIZED.inc()
            raise UpstreamError(f"the quotes vendor sent more than {self.settings.max_body_bytes} bytes")
        if status == 200:
            body = _our_quote(raw)
            if body is None:
                self._failed(metrics.LATENCY_ERROR, started, call)
                raise UpstreamError("the quotes vendor sent a malformed quote")
            metrics.LATENCY_OK.observe(time.perf_counter() - started)
            call.ok()
            return body
        if status == 404:
            # A healthy vendor that does not know the symbol.
            metrics.LATENCY_NOT_FOUND.observe(time.perf_counter() - started)
            call.ok()
            self.unknown.put(symbol, b"")
            raise _not_found()
        self._failed(metrics.LATENCY_ERROR, started, call)
        raise UpstreamError(f"the quotes vendor answered {status}", retry_after_s=1.0)

    def _failed(self, histogram: Histogram, started: float, call: BreakerCall) -> None:
        histogram.observe(time.perf_counter() - started)
        call.failed()

    def gauges(self) -> list[tuple[dict[str, str], float]]:
        return [({"breaker": "upstream"}, float(self.breaker.state))]

    def inflight(self) -> list[tuple[dict[str, str], float]]:
        return [({"dependency": "quotes"}, float(self.bulkhead.inflight))]


def _judged_in_call(_: BaseException) -> bool:
    return False


def _not_found() -> NotFoundError:
    return NotFoundError("the quotes vendor has no such symbol", field="path.symbol")


async def _read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The body, or None once it is past `limit` bytes: read no further than that, whatever the vendor sends
    (a declared length is not trusted to be the real one)."""
    if response.content_length is not None and response.content_length > limit:
        return None
    body = bytearray()
    async for chunk in response.content.iter_any():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def _our_quote(raw: bytes) -> bytes | None:
    """The vendor's body re-issued in our shape, or None if it is not a quote: we don't pass through
    whatever a third party sends."""
    try:
        quote = orjson.loads(raw)
        price = float(quote["price"])
        # float() reads "NaN" and "1e309" (a string) as nan and inf, which JSON cannot hold: orjson would write null.
        if not math.isfinite(price):
            return None
        return orjson.dumps(
            {
                "symbol": str(quote["symbol"]),
                "price": price,
                "currency": str(quote["currency"]),
                "as_of_ms": int(quote["as_of_ms"]),
            }
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, OverflowError):
        return None


def create_session(settings: UpstreamSettings) -> aiohttp.ClientSession:
    """The one HTTP client for the vendor. Its pool is as large as the bulkhead, so no admitted call
    waits for a connection, and none beyond it can open one."""
    connector = aiohttp.TCPConnector(
        limit=settings.max_inflight,
        limit_per_host=0,
        keepalive_timeout=30,
        ttl_dns_cache=300,
    )
    timeout = aiohttp.ClientTimeout(total=settings.timeout_s, connect=settings.connect_timeout_s)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        skip_auto_headers=("User-Agent",),
        # The vendor has no business setting state in our client; and no jar means no cookie work per call.
        cookie_jar=aiohttp.DummyCookieJar(),
    )


@asynccontextmanager
async def upstream_lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: UpstreamSettings = app.state.settings.upstream
    session = create_session(settings)
    service = QuoteService(session, settings)
    app.state.quotes = service
    live_gauges.add("tenk_breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.", service.gauges)
    live_gauges.add("tenk_upstream_inflight", "Upstream calls in flight, by dependency.", service.inflight)
    try:
        yield
    finally:
        live_gauges.remove("tenk_upstream_inflight", service.inflight)
        live_gauges.remove("tenk_breaker_state", service.gauges)
        await session.close()
