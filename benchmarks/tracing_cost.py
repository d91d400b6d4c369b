"""Tracing's cost per unsampled request, in-process: the Python work the server span adds, without a server.

`python -m benchmarks.tracing_cost` (after `tenk up`): tenk's app called as ASGI, `GET /products/1` from
the in-process cache, the API's CPU per request by `time.process_time`, best of 5 x 20,000 requests, in a
fresh process per mode: tracing off, then on at sample ratio 0 (every request dropped; spans would go to a
port nothing listens on, and none are made). Modes alternate for `--rounds`; the medians are printed.

Served figures (`make bench-reads`, the tracing cases) include the server and the kernel, and on a shared
host their noise is as large as this effect; this isolates it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from typing import Any

from tenk.app import create_app
from tenk.settings import Settings

REQUESTS = 20_000
REPEATS = 5


def _scope() -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": "/products/1", "raw_path": b"/products/1", "query_string": b"", "root_path": "",
        "headers": [(b"host", b"bench"), (b"user-agent", b"bench")], "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }  # fmt: skip


async def _measure(traced: bool) -> float:
    """Best CPU µs per request of REPEATS runs of REQUESTS."""
    app = create_app(Settings())
    async with app.router.lifespan_context(app):
        return await _serve_timed(app, traced)


async def _serve_timed(app: Any, traced: bool) -> float:
    target: Any = app
    if traced:
        from opentelemetry import trace

        from tenk.ops.server_spans import ServerSpans
        from tenk.ops.settings import OpsSettings
        from tenk.ops.tracing import setup_tracing

        setup_tracing("tracing-cost", OpsSettings(otel_endpoint="http://127.0.0.1:9", otel_sample_ratio=0.0))
        target = ServerSpans(app, trace.get_tracer("tenk.http"))
    statuses: set[int] = set()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.add(message["status"])

    async def serve(n: int) -> None:
        for _ in range(n):
            await target(_scope(), receive, send)

    await serve(2_000)
    assert statuses == {200}, statuses
    best = float("inf")
    for _ in range(REPEATS):
        started = time.process_time()
        await serve(REQUESTS)
        best = min(best, (time.process_time() - started) / REQUESTS * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=["off", "on"], help=argparse.SUPPRESS)  # one measurement, in a child
    args = parser.parse_args()
    if args.mode:
        print(asyncio.run(_measure(args.mode == "on")))
        return
    figures: dict[str, list[float]] = {"off": [], "on": []}
    for round_number in range(1, args.rounds + 1):
        for mode in figures:
            child = [sys.executable, "-m", "benchmarks.tracing_cost", "--mode", mode]
            output = subprocess.run(child, check=True, capture_output=True, text=True).stdout
            figures[mode].append(float(output.split()[-1]))
        print(f"round {round_number}: off {figures['off'][-1]:.1f} µs, on {figures['on'][-1]:.1f} µs", file=sys.stderr)
    off, on = statistics.median(figures["off"]), statistics.median(figures["on"])
    cost = statistics.median(b - a for a, b in zip(figures["off"], figures["on"], strict=True))
    print(f"CPU per request, medians of {args.rounds}: off {off:.1f} µs, on (ratio 0) {on:.1f} µs, cost {cost:.1f} µs")


if __name__ == "__main__":
    main()
