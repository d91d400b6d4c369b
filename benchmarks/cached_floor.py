"""`python -m benchmarks.cached_floor [--rounds N]`: how close to a bare hello a cached read can get.

Issue 27 asks for the cached product read at 0.85x a bare ASGI hello under the same server. `app` below is
the least such a read must do, written as one function: match the path and parse the id, find the bytes in
a dict, draw a request id and echo it, set the log's context variable, and time the request into the
latency histogram (without its lock, as `tenk.platform.metrics` writes it). It has no lane, no service, no LRU,
no hit counter, no key policy and no error handling: a floor, not an app. Each round serves the hello, then
this floor, one granian process on CPU 0 and wrk on CPU 1 (64 connections, ids drawn from 1..10,000), as
`bench_reads --probe` does; the medians and the floor's ratio to the hello are printed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
from binascii import hexlify
from bisect import bisect_left
from contextvars import ContextVar
from pathlib import Path
from time import perf_counter
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

from benchmarks._common import run_wrk, serve_pinned, stop
from benchmarks.bench_reads import HELLO_APP, _id_lua

_PRODUCTS = 10_000
_BODY = (
    b'{"id":%d,"sku":"SKU-%08d","name":"Product %d","description":"A fine product, number %d, for the floor.",'
    b'"price_cents":1999,"stock":10,"updated_at":"2026-11-30T00:00:00+00:00"}'
)
_PRODUCT_BODIES = {n: _BODY % (n, n, n, n) for n in range(1, _PRODUCTS + 1)}
_NOT_FOUND = b'{"error":"not_found"}'
_CONTENT_TYPE = (b"content-type", b"application/json")
_LATENCY = Histogram(
    "floor_request_duration_seconds",
    "",
    ["method", "route", "status"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=CollectorRegistry(),
).labels("GET", "/products/{product_id}", "200")
_BOUNDS, _BUCKETS, _SUM = _LATENCY._upper_bounds, _LATENCY._buckets, _LATENCY._sum
_request_id: ContextVar[bytes | None] = ContextVar("floor_request_id", default=None)
_draw = random.getrandbits


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    started = perf_counter()
    request_id = hexlify(_draw(128).to_bytes(16))
    token = _request_id.set(request_id)
    path: str = scope["path"]
    body = None
    if path.startswith("/products/") and path[10:].isdigit():
        body = _PRODUCT_BODIES.get(int(path[10:]))
    if body is None:
        body = _NOT_FOUND
    headers = [_CONTENT_TYPE, (b"content-length", b"%d" % len(body)), (b"x-request-id", request_id)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
    elapsed = perf_counter() - started
    _SUM._value += elapsed
    _BUCKETS[bisect_left(_BOUNDS, elapsed)]._value += 1
    _request_id.reset(token)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="tenk-floor-"))
    ids = workdir / "ids.lua"
    ids.write_text(_id_lua(_PRODUCTS))
    apps = {"hello": HELLO_APP, "floor": "benchmarks.cached_floor:app"}
    rps: dict[str, list[float]] = {name: [] for name in apps}
    for number in range(1, args.rounds + 1):
        for name, target in apps.items():
            process, base = serve_pinned(
                target, dict(os.environ), workdir / f"{name}.log", factory=False, ready_path="/products/1"
            )
            try:
                run_wrk(base + "/", ids, 3, 64)  # warm-up
                rps[name].append(run_wrk(base + "/", ids, args.seconds, 64)["rps"])
            finally:
                stop(process)
            print(f"round {number}: {name} {rps[name][-1]:,.0f} req/s", flush=True)
    ratios = [floor / hello for floor, hello in zip(rps["floor"], rps["hello"], strict=True)]
    print(
        f"hello {statistics.median(rps['hello']):,.0f} req/s, floor {statistics.median(rps['floor']):,.0f}: "
        f"floor / hello {statistics.median(ratios):.3f} (rounds {', '.join(f'{r:.3f}' for r in ratios)})"
    )


if __name__ == "__main__":
    main()
