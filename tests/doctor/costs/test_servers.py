"""The cost each server-configuration rule names, counted on a real uvicorn: access log lines written,
Python calls into the HTTP parser and the event loop, processes serving."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import h11
import httptools
import pytest

from harness.deadlines import deadline_s
from harness.stack import VENV_BIN
from tenk.stack import start_http_server
from tests.doctor.costs.served_app import app
from tests.doctor.costs.servers import get, served
from tests.doctor.costs.table import check, counted
from tests.support.waiting import eventually_blocking

REQUESTS = 10
REPO = Path(__file__).parents[3]


@contextmanager
def _uvicorn(tmp_path: Path, *options: str) -> Iterator[tuple[int, Path]]:
    """`uvicorn` as a user runs it, serving the app on a free port; its port and its output's file (whole
    once the block ends: the server has exited and flushed)."""
    logs: list[Path] = []

    def log(port: int) -> Path:
        logs.append(tmp_path / f"uvicorn-{port}.log")
        return logs[-1]

    server, base_url = start_http_server(
        "uvicorn",
        lambda port: [str(VENV_BIN / "uvicorn"), "tests.doctor.costs.served_app:app", "--port", str(port), *options],
        log,
        timeout=deadline_s(),
        cwd=REPO,
    )
    try:
        yield int(base_url.rsplit(":", 1)[1]), logs[-1]
    finally:
        server.stop()


def _lines(tmp_path: Path, *options: str) -> int:
    with _uvicorn(tmp_path, *options) as (port, log):
        for _ in range(REQUESTS):
            get(port, "/ping")
    return log.read_text().count('"GET /ping HTTP/1.1" 200')


def test_uvicorn_writes_an_access_line_per_request_unless_told_not_to(tmp_path: Path) -> None:
    check("access-log", _lines(tmp_path), _lines(tmp_path, "--no-access-log"))


class _Profile:
    """A profiler for the server's thread: calls into Python code under `folders`, counted while on."""

    def __init__(self, *folders: Path) -> None:
        self.prefixes = tuple(str(folder) + "/" for folder in folders)
        self.on = False
        self.calls = 0

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if self.on and event == "call" and frame.f_code.co_filename.startswith(self.prefixes):
            self.calls += 1


def _per_request(profile: _Profile, **options: object) -> list[int]:
    """The profiled calls each of `REQUESTS` GETs makes, one connection each."""
    counts = []
    with served(app, profile=profile, **options) as server:
        get(server.port, "/ping")
        for _ in range(REQUESTS):
            before = profile.calls
            profile.on = True
            get(server.port, "/ping")
            profile.on = False
            counts.append(profile.calls - before)
    return counts


def _folder(module: object) -> Path:
    return Path(str(getattr(module, "__file__", ""))).parent


def test_h11_parses_each_request_in_python_and_httptools_does_not() -> None:
    pattern = _per_request(_Profile(_folder(h11)), http="h11", loop="asyncio")
    fix = _per_request(_Profile(_folder(httptools)), http="httptools", loop="asyncio")
    assert len(set(pattern)) == 1, pattern
    check("h11-parser", pattern[0], max(fix))


def test_asyncio_runs_its_event_loop_in_python_and_uvloop_does_not() -> None:
    import asyncio

    loop_code = [Path(asyncio.__file__).parent / name for name in ("base_events.py", "selector_events.py")]
    selectors = Path(sys.modules["selectors"].__file__ or "")

    def profile() -> _Profile:
        found = _Profile()
        found.prefixes = tuple(str(path) for path in (*loop_code, selectors))
        return found

    pattern = _per_request(profile(), http="httptools", loop="asyncio")
    fix = _per_request(profile(), http="httptools", loop="uvloop")
    check("no-uvloop", min(pattern), max(fix))


def _pids(tmp_path: Path, workers: int, enough: Callable[[set[str]], bool]) -> set[str]:
    seen: set[str] = set()
    with _uvicorn(tmp_path, "--workers", str(workers), "--no-access-log") as (port, _):

        def answered() -> bool:
            for _ in range(REQUESTS):
                seen.add(get(port, "/pid").split(b"\r\n\r\n", 1)[1].decode())
            return enough(seen)

        eventually_blocking(answered, deadline_s(), f"{workers} worker(s) to answer")
    return seen


@pytest.mark.timeout(300)
def test_one_uvicorn_worker_is_one_process_serving(tmp_path: Path) -> None:
    one, two = counted("one-worker")
    # One worker: every answer comes from the same process. Two: the kernel hands new connections to
    # either, so both answer within a few rounds.
    assert len(_pids(tmp_path, 1, lambda seen: len(seen) >= 1)) == one
    assert len(_pids(tmp_path, 2, lambda seen: len(seen) >= two)) == two
