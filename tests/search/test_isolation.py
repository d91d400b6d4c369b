"""Search cannot starve the routes that share Postgres with it (issue 9, item 7)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import asyncpg
import httpx
import pytest

from harness.clients import AUTH, SEARCH_LIMITS_OFF
from harness.stack import Stack, _short_tmp, start_stack
from tenk.settings import Settings
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually_blocking

PRODUCTS = 20_000
ROUNDS = 6
SAMPLES_PER_BLOCK = 60
SETTLE_SAMPLES = 10
# The cap is sized by docs/search.md's rule, at most half of Postgres's cores (here Postgres shares this
# machine): each search let in keeps a Postgres core busy. On a 2-core machine that is 1. The default of 4
# passed quiet and in most runs of two suites started together, but in one (product misses 28 -> 124 ms)
# its four busy backends took both cores: CPU, not the pool. That CPU share alone adds tens of milliseconds to a
# millisecond query's tail. Starving the pool costs far more, because queries wait for connections: with
# 32 searches let in, /tasks went from 16 -> 132 ms and 1.3 -> 104 ms (measured), and the test fails.
SEARCH_CAP = max(1, (os.cpu_count() or 2) // 2)
CPU_SHARE_ALLOWANCE_S = 0.05
# The flood's first answer took under a second here when quiet; a starved machine may take far longer.
FLOOD_START_S = 120.0


@pytest.fixture(scope="module")
def big_stack() -> Iterator[Stack]:
    """Enough products that one exclusion-only search costs Postgres milliseconds."""
    root = _short_tmp("tenk-iso-")
    started = start_stack(root, products=PRODUCTS, tasks=2_000)
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(root, ignore_errors=True)


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _probe(http: httpx.Client, rng: random.Random) -> tuple[float, float]:
    """One /tasks page and one product read that misses every cache: both need a Postgres connection."""
    started = time.perf_counter()
    assert http.get("/tasks", params={"limit": 25}).status_code == 200
    tasks = time.perf_counter() - started
    started = time.perf_counter()
    assert http.get(f"/products/{rng.randint(1, PRODUCTS)}").status_code == 200
    return tasks, time.perf_counter() - started


def _block(http: httpx.Client, rng: random.Random) -> tuple[list[float], list[float]]:
    for _ in range(SETTLE_SAMPLES):
        _probe(http, rng)
    pairs = [_probe(http, rng) for _ in range(SAMPLES_PER_BLOCK)]
    return [t for t, _ in pairs], [p for _, p in pairs]


def _flood_answered(flood: subprocess.Popen[bytes], answered: Path) -> bool:
    """Has the flood had its first answer? On a busy machine its start (a Python process and its imports)
    can outlast the whole measurement, which would then compare two unloaded samples."""
    assert flood.poll() is None, flood.stderr.read().decode() if flood.stderr else ""
    return answered.exists()


def test_a_search_flood_leaves_tasks_and_product_misses_within_twice_their_unloaded_p99(
    big_stack: Stack, spawn_api: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    answered = tmp_path / "answered"
    api = spawn_api(
        big_stack,
        TENK_SEARCH_CACHE="false",
        TENK_SEARCH_MAX_INFLIGHT=str(SEARCH_CAP),
        TENK_SEARCH_MAX_WAIT_S="30",
        # The bulkhead alone, against a flood no budget slows (tenk.search.budget).
        **SEARCH_LIMITS_OFF,
        TENK_CATALOG_LOCAL_CACHE="false",
        TENK_CATALOG_REDIS_CACHE="false",
    )
    rng = random.Random(7)
    unloaded: dict[str, list[float]] = {"tasks": [], "product": []}
    loaded: dict[str, list[float]] = {"tasks": [], "product": []}
    flood = subprocess.Popen(
        [sys.executable, "-m", "tests.search.flood", api.base_url, "32", str(answered)],
        cwd=Path(__file__).resolve().parents[2],
        env=os.environ.copy(),
        stderr=subprocess.PIPE,
    )
    try:
        eventually_blocking(
            lambda: _flood_answered(flood, answered), FLOOD_START_S, "the flood's first answer", every=0.05
        )
        with httpx.Client(base_url=api.base_url, headers=AUTH, timeout=60) as http:
            # Interleaved, so that whatever else the machine is doing weighs on both sides alike.
            for _ in range(ROUNDS):
                flood.send_signal(signal.SIGSTOP)
                tasks, product = _block(http, rng)
                unloaded["tasks"] += tasks
                unloaded["product"] += product
                flood.send_signal(signal.SIGCONT)
                tasks, product = _block(http, rng)
                loaded["tasks"] += tasks
                loaded["product"] += product
        assert flood.poll() is None, flood.stderr.read().decode() if flood.stderr else ""
    finally:
        flood.send_signal(signal.SIGCONT)
        flood.kill()
        flood.wait()
    for route in ("tasks", "product"):
        before, during = _p99(unloaded[route]), _p99(loaded[route])
        assert during <= 2 * before + CPU_SHARE_ALLOWANCE_S, (
            f"{route}: p99 {during * 1000:.1f} ms under a search flood, {before * 1000:.1f} ms without"
        )


async def test_a_search_over_its_statement_timeout_is_503_with_retry_after(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    blocker = await asyncpg.connect(stack.pg.url)
    try:
        # No shared time budget: the 200 ms the cancelled search spent would otherwise be more than the
        # default share (0.15 s a second) gives back before the next search, which would be a 429.
        settings = stack.settings(search={"statement_timeout_ms": 200, "cache": False, "anonymous_db_share": 0})
        async with app_client_factory(settings) as client:
            # Waiting on a lock counts towards statement_timeout: the search is cancelled, not left hanging.
            await blocker.execute("BEGIN; LOCK TABLE products IN ACCESS EXCLUSIVE MODE")
            response = await client.get("/search", params={"q": "kettle"})
            await blocker.execute("ROLLBACK")
            assert response.status_code == 503
            assert response.headers["Retry-After"] == "1"
            assert response.json()["error"]["code"] == "unavailable"
            assert (await client.get("/search", params={"q": "kettle"})).status_code == 200
    finally:
        await blocker.close()
