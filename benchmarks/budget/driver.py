"""One hot path's cost in instructions, counted by callgrind: run as `valgrind --tool=callgrind
--instr-atstart=no python -m benchmarks.budget.driver PATH COUNT`, with the stack's settings in TENK_*.

The app is served in this process, straight through its ASGI callable (no HTTP server, no client
library): what is counted is the app's own work for each request, its Redis and Postgres clients
included, and nothing else. Each path is warmed up uninstrumented, then callgrind counts COUNT requests
(`callgrind_marks.c`). Instructions are used instead of CPU time because they do not move with the
machine's load: on this 2-core shared host, CPU time per request moved by 10-30 % from run to run,
instructions by well under 1 % (see `bench_budget.py`). The caches each path is about are switched on
or off by the caller, in the environment (`bench_budget.PATHS`).

`--plant-iterations N` runs a pure-Python loop of N iterations before every request: `bench_budget
--plant PATH=FRACTION` sizes N to cost FRACTION of what the path measures without it, which is how the
suite shows that the gate catches a regression of that size (and `gate_campaign` how often). The loop
costs the same each iteration (it makes no int objects, as `range` does past 256) and little besides: it
runs inline, not in a wrapper coroutine, whose own cost was a fixed 5 % of the cached hit, larger than a
planted 3 %.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import orjson
import uvloop

from benchmarks.budget.asgi import Requests, Scope, count_between_marks, request_scope
from tenk.app import create_app
from tenk.ingest import durability
from tenk.ingest.worker import Worker
from tenk.platform.readthrough import _invalidation as invalidation
from tenk.settings import Settings

BENCH_KEY = "tk_bench_budget"
EVENT = {"source": "budget", "ts": "2026-01-01T00:00:00Z", "payload": {"user": 42, "action": "click", "path": "/p/7"}}
TASK = {"title": "budget task", "notes": "written by bench_budget", "done": False}
BATCH = 500
WARM_UP = 200


def _request_maker(path: str) -> tuple[Callable[[int], tuple[Scope, bytes]], int, int]:
    """(the n-th request, its expected status, the units each counts for: events for a batch)."""
    if path in ("cached_hit", "redis_hit", "uncached"):
        # The cached paths read a small hot set; the uncached one reads a different product each time.
        ids = 50 if path != "uncached" else 1500
        return lambda n: (request_scope(BENCH_KEY, "GET", f"/products/{1 + n % ids}"), b""), 200, 1
    if path == "ping":
        return lambda n: (request_scope(BENCH_KEY, "GET", "/ping"), b""), 200, 1
    if path == "task_create":
        body = orjson.dumps(TASK)
        return lambda n: (request_scope(BENCH_KEY, "POST", "/tasks", body=body), body), 201, 1
    if path == "tasks_page":
        return lambda n: (request_scope(BENCH_KEY, "GET", "/tasks", b"limit=20"), b""), 200, 1
    if path == "search":
        words = [b"kettle", b"steel", b"lamp", b"wireless", b"cotton", b"oak", b"ceramic", b"travel"]
        return lambda n: (request_scope(BENCH_KEY, "GET", "/search", b"q=" + words[n % len(words)]), b""), 200, 1
    if path == "event":
        body = orjson.dumps(EVENT)
        return lambda n: (request_scope(BENCH_KEY, "POST", "/events", body=body), body), 202, 1
    if path == "batch_event":
        body = orjson.dumps([EVENT] * BATCH)
        return lambda n: (request_scope(BENCH_KEY, "POST", "/events/batch", body=body), body), 202, BATCH
    raise SystemExit(f"unknown path {path!r}")


def _quiet_background() -> None:
    """Make the app's timers (backlog polls, invalidation replays, the AOF check) fire once an hour: what
    they cost is not a request's, and the number that fire in a run grows with the run's wall time, which
    under callgrind moves with the machine's load."""
    invalidation.REPLAY_EVERY_S = 3600.0
    durability.WATCH_EVERY_S = 3600.0
    os.environ["TENK_INGEST_BACKLOG_POLL_MS"] = "3600000"


async def _measure_requests(path: str, count: int, plant_iterations: int, marks: Any) -> dict[str, float]:
    _quiet_background()
    app = create_app(Settings())
    make, expected, units = _request_maker(path)
    async with app.router.lifespan_context(app):
        await count_between_marks(Requests(app, expected, plant_iterations), make, count, marks, WARM_UP)
    return {"units": count * units}


class _DrainingWorker(Worker):
    """A worker that stops itself once it has written `rows` rows: no poller counted beside it."""

    def __init__(self, settings: Settings, name: str, rows: int, stop: asyncio.Event) -> None:
        super().__init__(settings, name)
        self._rows_left = rows
        self._stop = stop

    async def _acknowledge(self, taken: list[Any], written: int, *rest: Any) -> None:
        await super()._acknowledge(taken, written, *rest)
        self._rows_left -= written
        if self._rows_left <= 0:
            self._stop.set()


async def _measure_worker(rows: int, marks: Any) -> dict[str, float]:
    """One worker drains `rows` events that an API accepted: instructions per row, the worker's alone."""
    settings = Settings()
    app = create_app(settings)
    body = orjson.dumps([EVENT] * BATCH)
    async with app.router.lifespan_context(app):
        client = Requests(app, 202)
        for _ in range(rows // BATCH):
            await client.one(request_scope(BENCH_KEY, "POST", "/events/batch", body=body), body)
    stop = asyncio.Event()
    worker = _DrainingWorker(settings, "budget", rows, stop)
    marks.tenk_measure_start()
    await worker.run(stop)
    marks.tenk_measure_stop()
    return {"units": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("count", type=int)
    parser.add_argument("--plant-iterations", type=int, default=0)
    args = parser.parse_args()
    marks = ctypes.CDLL(os.environ["TENK_CALLGRIND_MARKS"])
    if args.path == "worker_row":
        result: dict[str, float] = uvloop.run(_measure_worker(args.count, marks))
    else:
        result = uvloop.run(_measure_requests(args.path, args.count, args.plant_iterations, marks))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
