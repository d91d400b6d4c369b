"""Real `tenk worker` processes, and small helpers to wait on what they write."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from tenk.ingest import keys
from tests.conftest import VENV_BIN, Stack


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        """kill -9: no flush, no goodbye."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 20) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


SpawnWorker = Callable[..., WorkerProcess]


@pytest.fixture
def spawn_worker(tmp_path: Path) -> Iterator[SpawnWorker]:
    """Start `tenk worker --name NAME` processes against a stack; every one is stopped after the test."""
    started: list[WorkerProcess] = []

    def spawn(stack: Stack, name: str, **env: str) -> WorkerProcess:
        log = tmp_path / f"worker-{name}-{len(started)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(VENV_BIN / "tenk"), "worker", "--name", name],
                env=stack.env(TENK_LOG_LEVEL="INFO", **env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        worker = WorkerProcess(name, process, log)
        started.append(worker)
        return worker

    yield spawn
    for worker in started:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    for worker in started:
        try:
            worker.process.wait(20)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait(5)


async def eventually(check: Callable[[], Awaitable[Any]], within: float, what: str, every: float = 0.1) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after `within` seconds."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(every)
    raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last!r})")


async def count_rows(dsn: str, sql: str, *args: object) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(sql, *args))
    finally:
        await conn.close()


async def backlog_of(redis_url: str) -> int:
    redis = Redis.from_url(redis_url)
    try:
        for group in await redis.xinfo_groups(keys.STREAM):
            if group["name"] in (keys.GROUP, keys.GROUP.encode()):
                return int(group["pending"]) + int(group["lag"] or 0)
        return 0
    finally:
        await redis.aclose()


def event(source: str, event_id: str | None = None, **payload: object) -> dict[str, object]:
    body: dict[str, object] = {"source": source, "ts": "2026-01-02T03:04:05.123456Z", "payload": payload or {"n": 1}}
    if event_id is not None:
        body["event_id"] = event_id
    return body
