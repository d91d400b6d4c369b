"""The fast paths built on libraries' private names give way to their stock twins: with TENK_STOCK_PATHS, and on
their own, with one warning, for a library installed outside the versions they are tested on."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from importlib.metadata import version

import asyncpg
import httpx
import pytest
from redis.asyncio import BlockingConnectionPool

from harness.clients import AUTH
from harness.stack import Stack, stock_paths
from tenk.app import create_app
from tenk.platform import create_pg_pool, create_redis, pg_pool_options, redis_options
from tenk.platform.fast_paths import TESTED, FastPath, in_tested_range, runs
from tenk.platform.metrics import REQUEST_LATENCY, latency_observer, use_stock_metrics
from tenk.platform.pg_pool import PromptPool
from tenk.platform.redis_pool import PromptConnectionPool
from tests.support.servers import ServerProcess


def _fast_path_gauges(metrics: str) -> dict[str, float]:
    return {path: float(value) for path, value in re.findall(r'^tenk_fast_path\{path="(\w+)"\} (\S+)$', metrics, re.M)}


@pytest.fixture
def untested() -> Iterator[Callable[[str], None]]:
    """Make a library's installed version fall outside its tested range; everything back as it was after."""

    def outside(distribution: str) -> None:
        TESTED[distribution] = ("0.0", "0.0.1")
        in_tested_range.cache_clear()

    saved = dict(TESTED)
    in_tested_range.cache_clear()
    yield outside
    TESTED.clear()
    TESTED.update(saved)
    in_tested_range.cache_clear()
    use_stock_metrics(stock_paths() == "1")


def test_with_stock_paths_a_real_server_serves_the_hot_routes_through_fastapi_routing(
    stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    stock = spawn_api(stack, "granian", TENK_STOCK_PATHS="1")
    with httpx.Client(base_url=stock.base_url, headers=AUTH, timeout=30) as http:
        assert http.get("/products/1").status_code == 200
        assert http.get("/products/1/stock").status_code in (200, 404)
        assert _fast_path_gauges(http.get("/metrics").text) == dict.fromkeys(FastPath, 0.0)


def test_without_the_switch_every_fast_path_serves(stack: Stack, spawn_api: Callable[..., ServerProcess]) -> None:
    fast = spawn_api(stack, "granian", TENK_STOCK_PATHS="0")  # whatever the suite runs with (make test-stock)
    with httpx.Client(base_url=fast.base_url, headers=AUTH, timeout=30) as http:
        assert http.get("/products/1").status_code == 200
        assert _fast_path_gauges(http.get("/metrics").text) == dict.fromkeys(FastPath, 1.0)


def test_the_switch_turns_off_the_lane_in_the_settings_tree(stack: Stack) -> None:
    assert create_app(stack.settings(stock_paths=True)).lane is None


def test_a_library_outside_its_tested_range_gets_its_stock_path_and_one_warning(
    stack: Stack, untested: Callable[[str], None], caplog: pytest.LogCaptureFixture
) -> None:
    untested("fastapi")
    with caplog.at_level(logging.WARNING, "tenk.fast_paths"):
        assert create_app(stack.settings(stock_paths=False)).lane is None
        assert create_app(stack.settings(stock_paths=False)).lane is None
    warnings = [record.getMessage() for record in caplog.records if record.name == "tenk.fast_paths"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"fastapi {version('fastapi')} is outside the versions")
    # The other fast paths read other libraries: they still serve.
    assert runs(FastPath.PG_POOL, stock_paths=False)


async def test_an_untested_asyncpg_gets_asyncpg_s_own_pool(stack: Stack, untested: Callable[[str], None]) -> None:
    settings = stack.settings(stock_paths=False)
    prompt = await create_pg_pool(settings.resolved_database_url, **pg_pool_options(settings))
    assert type(prompt) is PromptPool
    await prompt.close()
    untested("asyncpg")
    pool = await create_pg_pool(settings.resolved_database_url, **pg_pool_options(settings))
    try:
        assert type(pool) is asyncpg.Pool
        assert await pool.fetchval("SELECT count(*) FROM products WHERE id = 1") == 1
    finally:
        await pool.close()


async def test_an_untested_redis_py_gets_its_own_blocking_pool(stack: Stack, untested: Callable[[str], None]) -> None:
    settings = stack.settings(stock_paths=False)
    assert (
        type(create_redis(settings.resolved_redis_url, **redis_options(settings)).connection_pool)
        is PromptConnectionPool
    )
    untested("redis")
    redis = create_redis(settings.resolved_redis_url, **redis_options(settings))
    try:
        assert type(redis.connection_pool) is BlockingConnectionPool
        assert await redis.ping()
    finally:
        await redis.aclose()


def test_an_untested_prometheus_client_writes_through_its_own_methods(untested: Callable[[str], None]) -> None:
    use_stock_metrics(False)
    child = REQUEST_LATENCY.labels("GET", "/fast-paths-test", "200")
    assert latency_observer("GET", "/fast-paths-test", 200) != child.observe
    untested("prometheus-client")
    use_stock_metrics(False)
    assert latency_observer("GET", "/fast-paths-test", 200) == child.observe
