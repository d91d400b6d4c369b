"""Real `tenk worker` processes, stopped after each test: a fixture for every suite that needs one."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.stack import VENV_BIN, Stack
from tenk.stack import Spawned, spawn_logged

# A worker is a child with a log like any other; tests kill or terminate it and read its log.
WorkerProcess = Spawned
SpawnWorker = Callable[..., WorkerProcess]


@pytest.fixture
def spawn_worker(tmp_path: Path) -> Iterator[SpawnWorker]:
    """Start `tenk worker --name NAME` processes against a stack; every one is stopped after the test."""
    started: list[WorkerProcess] = []

    def spawn(stack: Stack, name: str, **env: str) -> WorkerProcess:
        log = tmp_path / f"worker-{name}-{len(started)}.log"
        argv = [str(VENV_BIN / "tenk"), "worker", "--name", name]
        started.append(spawn_logged(name, argv, log, env=stack.env(TENK_LOG_LEVEL="INFO", **env)))
        return started[-1]

    yield spawn
    for worker in started:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    for worker in started:
        worker.stop(timeout=20)
