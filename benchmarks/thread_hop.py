"""`python -m benchmarks.thread_hop [--requests N] [--rounds N]`: what FastAPI's thread pool costs a request
that never needed it (doctor's rule thread-hop).

Four routes of one FastAPI app, each doing no I/O: a `def` route and its `async def` twin, and an
`async def` route with a `def` dependency and with its `async def` twin. Each is driven in process
through httpx's ASGI transport, 16 requests in flight, and the process's CPU time (every thread's) is
divided by the requests. The client's own cost is in every figure alike, so the differences between
twins are what the hand-off to a thread and back costs. Pin it to one core (`taskset -c 0`) as a server
would be; rounds interleave the routes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time

import httpx
from fastapi import Depends, FastAPI

from benchmarks._common import print_medians

app = FastAPI()


def sync_dependency() -> int:
    return 1


async def async_dependency() -> int:
    return 1


@app.get("/def-route")
def def_route(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@app.get("/async-route")
async def async_route(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@app.get("/def-dependency")
async def with_def_dependency(value: int = Depends(sync_dependency)) -> dict[str, int]:
    return {"value": value}


@app.get("/async-dependency")
async def with_async_dependency(value: int = Depends(async_dependency)) -> dict[str, int]:
    return {"value": value}


PATHS = {
    "def route": "/def-route?a=1&b=2",
    "async def route": "/async-route?a=1&b=2",
    "def dependency": "/def-dependency",
    "async def dependency": "/async-dependency",
}


async def _cpu_us_a_request(client: httpx.AsyncClient, path: str, requests: int) -> float:
    in_flight = asyncio.Semaphore(16)

    async def one() -> None:
        async with in_flight:
            (await client.get(path)).raise_for_status()

    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(requests)))
    return (time.process_time() - started) * 1e6 / requests


async def _measure(requests: int, rounds: int) -> dict[str, list[float]]:
    logging.getLogger("httpx").disabled = True
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
        for path in PATHS.values():  # warm: the pool's threads started, the routes' code paths loaded
            await _cpu_us_a_request(client, path, 300)
        figures: dict[str, list[float]] = {name: [] for name in PATHS}
        for _ in range(rounds):
            for name, path in PATHS.items():
                figures[name].append(await _cpu_us_a_request(client, path, requests))
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    figures = asyncio.run(_measure(args.requests, args.rounds))
    print_medians("route", "CPU µs a request, client included", figures, 0)


if __name__ == "__main__":
    main()
