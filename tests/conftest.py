"""Session-wide real services: an embedded Postgres and Redis on free ports, migrated and seeded once.

Tests that break a service (stop Redis, kill Postgres) must use `private_stack`, never `stack`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from tenk.app import create_app
from tenk.lab.targets.mock_upstream import MockUpstreamProcess, Profile, start_mock_upstream
from tenk.ops.api_keys import digest
from tenk.settings import Settings
from tenk.stack import (
    EmbeddedPostgres,
    EmbeddedRedis,
    Spawned,
    free_port,
    start_http_server,
    start_on_free_port,
)
from tenk.stack._ports import PortTakenError, port_is_bindable
from tenk.stack.migrate import migrate
from tenk.stack.redis_cluster import LocalRedisCluster, free_cluster_ports
from tenk.stack.redis_sentinel import LocalRedisSentinel
from tenk.stack.seed import seed

# The PgBouncer fixtures, shared by the stack and ingest pooler tests.
pytest_plugins = ["tests.stack.pgbouncer"]

# The lab's default CPU budget on a machine under 4 cores is "auto", which probes every rung before it
# runs: the suite's ladders test other things, in seconds, so they run unbudgeted unless they set a
# budget (tests/lab/test_budgeted_rungs.py tests the budget, and "auto", on their own).
os.environ.setdefault("TENK_LAB_CPU_BUDGET", "none")

TEST_API_KEY = "tk_test_key_for_the_suite"
AUTH = {"Authorization": f"Bearer {TEST_API_KEY}"}
TEST_CURSOR_SECRET = "cursor-secret-for-the-suite"
SEED_PRODUCTS = 2_000
SEED_TASKS = 300
VENV_BIN = Path(sys.executable).parent
# Generous: a server listens within seconds, but a shared 2-core machine can slow start-up several-fold.
SERVER_START_S = 60.0


@dataclass
class Stack:
    root: Path
    pg: EmbeddedPostgres
    redis: EmbeddedRedis
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self, **overrides: str) -> dict[str, str]:
        """Environment for a tenk process (server, worker) pointed at this stack."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TENK_")}
        env.update(
            {
                "TENK_DATABASE_URL": self.pg.url,
                "TENK_REDIS_URL": self.redis.url,
                "TENK_API_KEYS": digest(TEST_API_KEY),
                "TENK_CURSOR_SECRET": TEST_CURSOR_SECRET,
                "TENK_DATA_DIR": str(self.root / "data"),
                "TENK_LOG_LEVEL": "WARNING",
            }
        )
        env.update(self.extra_env)
        env.update(overrides)
        return env

    def settings(self, **overrides: object) -> Settings:
        """The settings tree for an app on this stack. A branch's overrides are merged into it:
        `stack.settings(ingest={"max_backlog": 10})` keeps the other ingest settings as they are."""
        values: dict[str, object] = {
            "database": {"url": self.pg.url},
            "redis": {"url": self.redis.url},
            "api_keys": [digest(TEST_API_KEY)],
            "cursor_secret": TEST_CURSOR_SECRET,
            "data_dir": self.root / "data",
            "log_level": "WARNING",
        }
        # Settings ignores unknown names (the environment holds other TENK_* too): a misspelt or flat
        # name here would silently test the defaults instead.
        unknown = set(overrides) - set(Settings.model_fields)
        assert not unknown, f"not settings: {sorted(unknown)} (branches take dicts: redis={{'url': ...}})"
        return Settings.model_validate(_merged(values, overrides))

    def stop(self) -> None:
        self.pg.stop()
        self.redis.stop()


def _merged(base: dict[str, object], overrides: dict[str, object]) -> dict[str, object]:
    merged = dict(base)
    for name, value in overrides.items():
        below = merged.get(name)
        if isinstance(below, dict) and isinstance(value, dict):
            merged[name] = _merged(below, value)
        else:
            merged[name] = value
    return merged


def start_stack(root: Path, products: int = SEED_PRODUCTS, tasks: int = SEED_TASKS, **redis_kwargs: object) -> Stack:
    # A port can be taken between choosing and binding it (other runs share the machine): retry on another.
    pg = start_on_free_port(lambda port: EmbeddedPostgres(root / "postgres", port))
    redis = start_on_free_port(lambda port: EmbeddedRedis(root / "redis", port, **redis_kwargs))  # type: ignore[arg-type]
    asyncio.run(migrate(pg.url))
    asyncio.run(seed(pg.url, products, tasks))
    return Stack(root, pg, redis)


async def fresh_database(stack: Stack, name: str) -> str:
    """A new, empty database on the stack's Postgres, owned by the app's role; its URL."""
    # Creating a database is the superuser's; the app's role owns it, as it owns the application database.
    admin = await asyncpg.connect(stack.pg.superuser_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await admin.execute(f'CREATE DATABASE "{name}" OWNER "{stack.pg.app_role}"')
    finally:
        await admin.close()
    return stack.pg.url.rsplit("/", 1)[0] + "/" + name


def _short_tmp(prefix: str) -> Path:
    # Unix socket paths are limited to ~100 bytes; pytest's tmp paths can be longer.
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


@pytest.fixture
def stack_root() -> Iterator[Path]:
    """An empty directory to use as a tenk data dir: a short path (Unix sockets), private, removed after."""
    root = _short_tmp("tenk-t-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


class _ServerGroup(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...


_Group = TypeVar("_Group", bound=_ServerGroup)


def _started_on_fresh_ports(make: Callable[[int], _Group], attempts: int = 3) -> _Group:
    """`make(attempt).start()`; ports can be taken between choosing and binding them, so a group that
    fails to start is stopped and made again, on fresh ports."""
    for attempt in range(attempts - 1):
        group = make(attempt)
        try:
            group.start()
        except (PortTakenError, RuntimeError, TimeoutError):
            group.stop()
            continue
        return group
    group = make(attempts - 1)
    try:
        group.start()
    except (PortTakenError, RuntimeError, TimeoutError):
        group.stop()
        raise
    return group


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


@contextmanager
def own_stack(prefix: str = "tenk-priv-") -> Iterator[Stack]:
    """A small stack nobody else uses: for tests that stop a server, or change and delete data at will."""
    root = _short_tmp(prefix)
    started = start_stack(root, products=200, tasks=50)
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


async def _client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tenk.test") as client:
            yield client


@pytest.fixture
async def client(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client over the real app, lifespan and all, on the shared stack."""
    async for c in _client_for(create_app(stack.settings())):
        yield c


@pytest.fixture
def app_client_factory() -> Callable[[Settings], AsyncIterator[httpx.AsyncClient]]:
    """For tests that need an app with particular settings: `async for c in factory(settings): ...`."""
    return lambda settings: _client_for(create_app(settings))


@dataclass
class ServerProcess:
    base_url: str
    server: Spawned

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self.server.process

    @property
    def pid(self) -> int:
        return self.server.pid

    def log_tail(self, lines: int = 40) -> str:
        return self.server.log_tail(lines)


@pytest.fixture
def spawn_api(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start real `tenk serve` processes (one per call) against a stack; all are stopped after the test."""
    started: list[ServerProcess] = []

    def spawn(stack: Stack, server: str = "uvicorn", workers: int = 1, **env: str) -> ServerProcess:
        spawned, base_url = start_http_server(
            "tenk serve",
            lambda port: [
                str(VENV_BIN / "tenk"),
                "serve",
                *("--server", server, "--port", str(port), "--workers", str(workers)),
            ],
            lambda port: tmp_path / f"api-{port}.log",
            timeout=SERVER_START_S,
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
    with start_mock_upstream(Profile(p50_ms=0, p99_ms=0), log=log, seed=1) as process:
        yield process


@pytest.fixture
def mock(mock_process: MockUpstreamProcess) -> MockUpstreamProcess:
    """The module's mock vendor, back at zero delay with fresh counts."""
    mock_process.set_profile(p50_ms=0, p99_ms=0, error_rate=0, hang_rate=0)
    mock_process.reset_stats()
    return mock_process


def free_port_run(length: int, bus_offset: int = 0) -> int:
    """A port p with p .. p + length - 1 all free: the cluster's stores sit beside the embedded ports.
    With `bus_offset`, each port's Redis Cluster bus port (port + 10000) must be free as well."""
    for _ in range(200):
        base = free_port()
        ports = range(base, base + length)
        if base + length + bus_offset < 65535 and all(
            port_is_bindable(port) and (not bus_offset or port_is_bindable(port + bus_offset)) for port in ports
        ):
            return base
    raise AssertionError(f"no run of {length} free ports found")
