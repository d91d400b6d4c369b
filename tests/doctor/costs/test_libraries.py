"""The cost each library-level rule names, counted on the real libraries at the locked versions: blocking
calls on the loop's thread, connections made, reads with no deadline, a pool's ceiling, time series."""

from __future__ import annotations

import asyncio
import io
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import aiohttp
import httpx
import prometheus_client
import pytest
import redis
import redis.asyncio
import requests
from fastapi import Depends, FastAPI, Request

from harness.stack import Stack
from tests.doctor.costs.counting import audited, calls_into
from tests.doctor.costs.redis_pool import address_key, connections, connects
from tests.doctor.costs.servers import START_S, HeldServer
from tests.doctor.costs.table import check, counted
from tests.support.inprocess import app_in_process
from tests.support.waiting import eventually

REQUESTS = 10
CONCURRENT = 150


async def test_blocking_call_in_an_async_route_runs_on_the_loop_thread(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{}")
    app = FastAPI()

    @app.get("/pattern")
    async def pattern() -> dict[str, int]:
        time.sleep(0)  # noqa: ASYNC251 - the pattern whose cost is counted
        return {"size": len(settings.open().read())}

    @app.get("/fix")
    async def fix() -> dict[str, int]:
        await asyncio.to_thread(time.sleep, 0)
        return {"size": len(await asyncio.to_thread(settings.read_text))}

    async def on_the_loop(path: str) -> int:
        # The first request may read a source file for a warning's text: the second is the route's own.
        (await client.get(path)).raise_for_status()
        # The profiler is this thread's, the loop's: calls in the pool's threads are not counted.
        with calls_into(time.sleep, io.open) as calls:
            (await client.get(path)).raise_for_status()
        return sum(calls.values())

    async with app_in_process(app) as client:
        check("blocking-call", await on_the_loop("/pattern"), await on_the_loop("/fix"))


async def _per_request(request: Request) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis.from_url(request.app.state.url)
    try:
        yield client
    finally:
        await client.aclose()


PerRequestRedis = Annotated[redis.asyncio.Redis, Depends(_per_request)]


async def test_a_client_made_per_request_connects_on_every_request_and_a_shared_one_once(stack: Stack) -> None:
    url = stack.redis.url

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.url = url
        app.state.redis = redis.asyncio.Redis.from_url(url)
        yield
        await app.state.redis.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.get("/pattern")
    async def pattern(client: PerRequestRedis) -> dict[str, bool]:
        return {"ok": bool(await client.ping())}

    @app.get("/fix")
    async def fix(request: Request) -> dict[str, bool]:
        return {"ok": bool(await request.app.state.redis.ping())}

    async def made(path: str) -> int:
        with audited().watching() as events:
            for _ in range(REQUESTS):
                (await client.get(path)).raise_for_status()
        return connects(events, url)

    async with app_in_process(app) as client:
        check("per-request-client", await made("/pattern"), await made("/fix"))


def _reads_with_no_deadline(call: Callable[[str], object], held: HeldServer, loop: asyncio.AbstractEventLoop) -> int:
    """Whether the socket a call reads its answer from waits with no deadline (1) or has one (0), taken
    while a server holds the answer back."""
    url = f"http://127.0.0.1:{held.port}/quote"
    with audited().watching() as events:
        worker = threading.Thread(target=call, args=(url,), daemon=True)
        worker.start()
        try:
            asyncio.run_coroutine_threadsafe(
                eventually(lambda: held.requests >= 1, START_S, "the request to reach the server"), loop
            ).result()
            sockets = [
                args[0] for event, args, _ in events if event == "socket.connect" and address_key(args[1]) == held.port
            ]
        finally:
            loop.call_soon_threadsafe(held.release)
            worker.join(START_S)
    assert len(sockets) == 1
    return 1 if sockets[0].gettimeout() is None else 0


@pytest.fixture
def held_server() -> Iterator[tuple[HeldServer, asyncio.AbstractEventLoop]]:
    """A HeldServer on a loop of its own thread, for clients that block the caller's."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    held = HeldServer()
    asyncio.run_coroutine_threadsafe(held.start(), loop).result(START_S)
    yield held, loop
    asyncio.run_coroutine_threadsafe(held.stop(), loop).result(START_S)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(START_S)
    loop.close()


CLIENTS: dict[str, tuple[Callable[[str], object], Callable[[str], object]]] = {
    "requests": (lambda url: requests.get(url), lambda url: requests.get(url, timeout=5)),
    "urlopen": (
        lambda url: urllib.request.urlopen(url).read(),
        lambda url: urllib.request.urlopen(url, timeout=5).read(),
    ),
    "httpx": (lambda url: httpx.get(url, timeout=None), lambda url: httpx.get(url)),
}


@pytest.mark.parametrize("case", sorted(CLIENTS))
def test_an_outbound_call_without_a_timeout_reads_with_no_deadline(
    case: str, held_server: tuple[HeldServer, asyncio.AbstractEventLoop]
) -> None:
    held, loop = held_server
    pattern, fix = CLIENTS[case]
    first = _reads_with_no_deadline(pattern, held, loop)
    second = HeldServer()
    asyncio.run_coroutine_threadsafe(second.start(), loop).result(START_S)
    try:
        check("no-timeout", first, _reads_with_no_deadline(fix, second, loop), case)
    finally:
        asyncio.run_coroutine_threadsafe(second.stop(), loop).result(START_S)


async def test_an_aiohttp_session_without_a_timeout_waits_five_minutes_for_a_hung_upstream() -> None:
    async with aiohttp.ClientSession() as pattern, aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(5)) as fix:
        assert pattern.timeout.total is not None
        assert fix.timeout.total is not None
        check("no-timeout", int(pattern.timeout.total), int(fix.timeout.total), "aiohttp")


async def test_an_asyncio_redis_pool_opens_connections_up_to_its_ceiling(stack: Stack) -> None:
    opened = await connections(stack.redis.url)
    pattern, fix = (opened[f"unbounded-pool/redis.asyncio/{side}"] for side in ("pattern", "fix"))
    check("unbounded-pool", pattern, fix, "redis.asyncio")


async def _held_connections(get: Callable[[str], Any], expected: int) -> int:
    """Connections `CONCURRENT` concurrent GETs open to a server that answers none until `expected`
    have arrived."""
    held = HeldServer()
    await held.start()
    url = f"http://127.0.0.1:{held.port}/quote"
    try:
        calls = asyncio.gather(*(get(url) for _ in range(CONCURRENT)))
        await eventually(lambda: held.requests >= expected, START_S, f"{expected} requests held at once")
        held.release()
        await calls
    finally:
        await held.stop()
    return held.connections


async def test_an_http_pool_without_a_limit_opens_a_connection_per_concurrent_request() -> None:
    unbounded = counted("unbounded-pool", "httpx.Limits")
    async with (
        httpx.AsyncClient(limits=httpx.Limits(max_connections=None)) as pattern,
        httpx.AsyncClient(limits=httpx.Limits(max_connections=10)) as fix,
    ):
        check(
            "unbounded-pool",
            await _held_connections(pattern.get, unbounded[0]),
            await _held_connections(fix.get, unbounded[1]),
            "httpx.Limits",
        )

    async def fetch(session: aiohttp.ClientSession, url: str) -> bytes:
        async with session.get(url) as response:
            return await response.read()

    limit = counted("unbounded-pool", "aiohttp.TCPConnector")
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as pattern_session,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=10)) as fix_session,
    ):
        check(
            "unbounded-pool",
            await _held_connections(lambda url: fetch(pattern_session, url), limit[0]),
            await _held_connections(lambda url: fetch(fix_session, url), limit[1]),
            "aiohttp.TCPConnector",
        )


async def test_a_label_from_the_path_makes_a_series_per_path_and_the_template_one() -> None:
    registry = prometheus_client.CollectorRegistry()
    by_path = prometheus_client.Counter("by_path", "requests", ["path"], registry=registry)
    by_template = prometheus_client.Counter("by_template", "requests", ["path"], registry=registry)
    app = FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: int, request: Request) -> dict[str, int]:
        by_path.labels(request.url.path).inc()
        by_template.labels(request.scope["route"].path).inc()
        return {"id": item_id}

    async with app_in_process(app) as client:
        for item_id in range(20):
            (await client.get(f"/items/{item_id}")).raise_for_status()

    def series(name: str) -> int:
        return sum(
            1
            for metric in registry.collect()
            if metric.name == name
            for s in metric.samples
            if s.name.endswith("_total")
        )

    check("metric-label", series("by_path"), series("by_template"))
