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
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tenk.app import create_app
from tenk.lab.mock_upstream import MockUpstreamProcess, Profile, start_mock_upstream
from tenk.ops.auth import digest
from tenk.settings import Settings
from tenk.stack import EmbeddedPostgres, EmbeddedRedis, free_port
from tenk.stack.migrate import migrate
from tenk.stack.seed import seed

TEST_API_KEY = "tk_test_key_for_the_suite"
AUTH = {"Authorization": f"Bearer {TEST_API_KEY}"}
SEED_PRODUCTS = 2_000
SEED_TASKS = 300
VENV_BIN = Path(sys.executable).parent


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
                "TENK_DATA_DIR": str(self.root / "data"),
                "TENK_LOG_LEVEL": "WARNING",
            }
        )
        env.update(self.extra_env)
        env.update(overrides)
        return env

    def settings(self, **overrides: object) -> Settings:
        values: dict[str, object] = {
            "database_url": self.pg.url,
            "redis_url": self.redis.url,
            "api_keys": [digest(TEST_API_KEY)],
            "data_dir": self.root / "data",
            "log_level": "WARNING",
        }
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.pg.stop()
        self.redis.stop()


def start_stack(root: Path, products: int = SEED_PRODUCTS, tasks: int = SEED_TASKS, **redis_kwargs: object) -> Stack:
    pg = EmbeddedPostgres(root / "postgres", free_port())
    redis = EmbeddedRedis(root / "redis", free_port(), **redis_kwargs)  # type: ignore[arg-type]
    pg.start()
    redis.start()
    asyncio.run(migrate(pg.url))
    asyncio.run(seed(pg.url, products, tasks))
    return Stack(root, pg, redis)


def _short_tmp(prefix: str) -> Path:
    # Unix socket paths are limited to ~100 bytes; pytest's tmp paths can be longer.
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


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
    root = _short_tmp("tenk-priv-")
    started = start_stack(root, products=200, tasks=50)
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(root, ignore_errors=True)


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
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def wait_http_ok(url: str, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=0.5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer 200 within {timeout}s")


@pytest.fixture
def spawn_api(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start real `tenk serve` processes (one per call) against a stack; all are stopped after the test."""
    started: list[ServerProcess] = []

    def spawn(stack: Stack, server: str = "uvicorn", workers: int = 1, **env: str) -> ServerProcess:
        port = free_port()
        log = tmp_path / f"api-{port}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(VENV_BIN / "tenk"), "serve", "--server", server, "--port", str(port), "--workers", str(workers)],
                env=stack.env(**env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server_process = ServerProcess(f"http://127.0.0.1:{port}", process, log)
        started.append(server_process)
        try:
            wait_http_ok(server_process.base_url + "/health", 30, process)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}\n{server_process.log_tail()}") from None
        return server_process

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
