"""Session-wide real services: an embedded Postgres and Redis on free ports, migrated and seeded once.

Tests that break a service (stop Redis, kill Postgres) must use `private_stack`, never `stack`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest

from harness.deadlines import deadline_s, timed_start
from harness.redis_sentinel import LocalRedisSentinel
from harness.stack import (
    VENV_BIN,
    Stack,
    _short_tmp,
    _started_on_fresh_ports,
    fast_path_serves,
    own_stack,
    start_stack,
    stock_paths,
)
from tenk.app import create_app
from tenk.lab.targets.mock_upstream import MockUpstreamProcess, Profile, start_mock_upstream
from tenk.platform.fast_paths import FastPath
from tenk.settings import Settings
from tenk.stack import (
    free_port,
    start_http_server,
)
from tenk.stack.redis_cluster import LocalRedisCluster, free_cluster_ports
from tests.support.inprocess import app_in_process
from tests.support.servers import ServerProcess

# The PgBouncer fixtures, shared by the stack and ingest pooler tests.
pytest_plugins = ["tests.stack.pgbouncer", "tests.support.workers"]

# The lab's default CPU budget on a machine under 4 cores is "auto", which probes every rung before it
# runs: the suite's ladders test other things, in seconds, so they run unbudgeted unless they set a
# budget (tests/lab/test_budgeted_rungs.py tests the budget, and "auto", on their own).
os.environ.setdefault("TENK_LAB_CPU_BUDGET", "none")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `fast_path(FastPath...)` asserts that fast path itself (the hot lane answers, the prompt
    pool is the pool): it cannot apply where the suite's apps serve through the stock twin instead."""
    for mark in item.iter_markers("fast_path"):
        off = [str(path) for path in mark.args if not fast_path_serves(FastPath(path))]
        if off:
            stock = Settings.model_validate({"stock_paths": stock_paths()}).stock_paths
            why = (
                f"TENK_STOCK_PATHS={stock_paths()} (make test-stock)" if stock else "a library outside its TESTED range"
            )
            pytest.skip(f"asserts the fast path {', '.join(off)} itself, which {why} turns off")


@pytest.fixture
def stack_root() -> Iterator[Path]:
    """An empty directory to use as a tenk data dir: a short path (Unix sockets), private, removed after."""
    root = _short_tmp("tenk-t-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalRedisCluster]:
    """3 masters and 3 replicas on 127.0.0.1 (Redis >= 7), started once for the `cluster` tests."""
    root = _short_tmp("tenk-cluster-")
    cluster = _started_on_fresh_ports(
        lambda attempt: LocalRedisCluster(root / f"cluster-{attempt}", free_cluster_ports(6), masters=3)
    )
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def redis_sentinel() -> Iterator[LocalRedisSentinel]:
    """A master, a replica and three sentinels of this test's own: tests fail over or stop them."""
    root = _short_tmp("tenk-sentinel-")
    group = _started_on_fresh_ports(
        lambda attempt: LocalRedisSentinel(root / f"sentinel-{attempt}", [free_port() for _ in range(5)])
    )
    try:
        yield group
    finally:
        group.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    root = _short_tmp("tenk-test-")
    started = start_stack(root)
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def private_stack() -> Iterator[Stack]:
    """A stack of this test's own, for tests that stop or crash a server."""
    with own_stack() as started:
        yield started


@pytest.fixture
async def client(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client over the real app, lifespan and all, on the shared stack."""
    async with app_in_process(create_app(stack.settings())) as c:
        yield c


@pytest.fixture
def app_client_factory() -> Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]:
    """For tests that need an app with particular settings: `async with factory(settings) as c: ...`."""
    return lambda settings: app_in_process(create_app(settings))


@pytest.fixture
def spawn_api(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start real `tenk serve` processes (one per call) against a stack, serving `app` (a factory, module:callable);
    all are stopped after the test."""
    started: list[ServerProcess] = []

    def spawn(
        stack: Stack, server: str = "uvicorn", workers: int = 1, app: str = "tenk.app:create_app", **env: str
    ) -> ServerProcess:
        with timed_start():
            spawned, base_url = start_http_server(
                "tenk serve",
                lambda port: [
                    str(VENV_BIN / "tenk"),
                    "serve",
                    *("--server", server, "--port", str(port), "--workers", str(workers), "--app", app),
                ],
                lambda port: tmp_path / f"api-{port}.log",
                timeout=deadline_s(),
                env=stack.env(**env),
            )
        started.append(ServerProcess(base_url, spawned))
        return started[-1]

    yield spawn
    for server_process in started:
        server_process.process.terminate()
    for server_process in started:
        try:
            server_process.process.wait(15)
        except subprocess.TimeoutExpired:
            server_process.process.kill()


@pytest.fixture(scope="module")
def mock_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockUpstreamProcess]:
    """A real `tenk mock-upstream` process for the module, at zero delay."""
    log = tmp_path_factory.mktemp("mock") / "mock.log"
    with timed_start():
        process = start_mock_upstream(Profile(p50_ms=0, p99_ms=0), log=log, seed=1, timeout_s=deadline_s())
    with process:
        yield process


@pytest.fixture
def mock(mock_process: MockUpstreamProcess) -> MockUpstreamProcess:
    """The module's mock vendor, back at zero delay with fresh counts."""
    mock_process.set_profile(p50_ms=0, p99_ms=0, error_rate=0, hang_rate=0)
    mock_process.reset_stats()
    return mock_process
