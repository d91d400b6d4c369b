"""`make run` (`tenk dev`) keeps the system up when a helper process dies, and Ctrl-C still stops it all."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from harness.deadlines import deadline_s
from harness.stack import VENV_BIN
from tenk.stack.dev import Child, GaveUpError, Supervisor
from tests.stack.dev_runs import DevRun, dev_run, read_write_and_event
from tests.support.waiting import eventually_blocking


@pytest.fixture
def dev(stack_root: Path) -> Iterator[DevRun]:
    yield from dev_run(VENV_BIN / "tenk", stack_root)


def test_a_killed_worker_is_restarted_loudly_the_api_keeps_serving_and_ctrl_c_stops_all(dev: DevRun) -> None:
    [worker] = dev.children("worker --name")
    [api] = [p for p in psutil.Process(dev.process.pid).children() if p.pid != worker.pid]
    worker.send_signal(signal.SIGKILL)

    eventually_blocking(lambda: "was killed by SIGKILL" in dev.log_text(), deadline_s(), "a log line naming the death")
    assert "ingest worker" in dev.log_text()
    eventually_blocking(lambda: any(p.pid != worker.pid for p in dev.children("worker --name")), 60, "a new worker")
    assert dev.process.poll() is None
    assert api.is_running(), "the API must not be stopped because the worker died"
    assert httpx.get(dev.base_url + "/products/3", timeout=10).status_code == 200
    # The new worker drains events: the system works again as a whole.
    read_write_and_event(dev)
    # Ctrl-C then stops every child, the restarted worker among them (on the same run: a `tenk dev` start is
    # among the suite's slowest set-ups, and a run of its own proved no more).
    children = psutil.Process(dev.process.pid).children()
    assert len(children) >= 2
    assert dev.stop() == 0
    _, alive = psutil.wait_procs(children, timeout=deadline_s())
    assert alive == []


@pytest.fixture
def dev_with_mock(stack_root: Path) -> Iterator[DevRun]:
    yield from dev_run(VENV_BIN / "tenk", stack_root, mock_upstream=True)


def _quote_status(run: DevRun) -> int:
    auth = {"Authorization": f"Bearer {run.key()}"}
    return httpx.get(run.base_url + "/quotes/AAPL", headers=auth, timeout=10).status_code


def test_a_killed_mock_vendor_is_restarted_loudly_and_the_api_keeps_serving(dev_with_mock: DevRun) -> None:
    dev = dev_with_mock
    eventually_blocking(lambda: _quote_status(dev) == 200, 60, "a quote through the mock vendor")
    [mock] = dev.children("mock-upstream")
    helpers = {mock.pid, *(p.pid for p in dev.children("worker --name"))}
    [api] = [p for p in psutil.Process(dev.process.pid).children() if p.pid not in helpers]
    mock.send_signal(signal.SIGKILL)

    eventually_blocking(
        lambda: f"mock-upstream (pid {mock.pid}) was killed by SIGKILL" in dev.log_text(),
        30,
        "a log line naming its death",
    )
    # While the vendor is down the API answers what does not need it.
    assert httpx.get(dev.base_url + "/products/3", timeout=10).status_code == 200
    eventually_blocking(lambda: any(p.pid != mock.pid for p in dev.children("mock-upstream")), 60, "a new mock vendor")
    assert dev.process.poll() is None
    assert api.is_running(), "the API must not be stopped because the mock vendor died"
    # Quotes come back once the new mock listens (and the breaker, if the outage opened it, lets a probe by).
    eventually_blocking(lambda: _quote_status(dev) == 200, 60, "a quote through the restarted mock vendor")
    read_write_and_event(dev)


def test_ctrl_c_stops_every_child_of_a_run_started_with_sigint_ignored(stack_root: Path) -> None:
    # `make run &` in a script, nohup-style launchers and some CI runners start it with SIGINT ignored.
    for dev in dev_run(VENV_BIN / "tenk", stack_root, sigint_ignored=True):
        children = psutil.Process(dev.process.pid).children()
        assert dev.stop() == 0
        _, alive = psutil.wait_procs(children, timeout=5)
        assert alive == []


def _crasher(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_child_that_keeps_dying_at_once_makes_the_supervisor_give_up() -> None:
    supervisor = Supervisor(
        [Child("doomed", _crasher("raise SystemExit(3)")), Child("fine", _crasher("import time; time.sleep(60)"))],
        backoff_first_s=0.01,
        backoff_max_s=0.04,
        give_up_after=4,
    )
    supervisor.start()
    try:
        with pytest.raises(GaveUpError, match="doomed exited with code 3 4 times in a row"):
            # check() returns nothing until it gives up, and then raises.
            eventually_blocking(supervisor.check, 60, "the supervisor to give up on doomed", every=0.01)
        fine = supervisor.children[1].process
        assert fine is not None
        assert fine.poll() is None, "a healthy sibling is never restarted or stopped by another's deaths"
    finally:
        supervisor.stop()
    assert all(c.process is None or c.process.poll() is not None for c in supervisor.children)


def test_restart_backoff_doubles_up_to_its_cap() -> None:
    child = Child("doomed", _crasher("raise SystemExit(1)"))
    supervisor = Supervisor([child], backoff_first_s=0.05, backoff_max_s=0.2, give_up_after=100)
    supervisor.start()
    delays: list[float] = []
    try:

        def four_deaths_seen() -> bool:
            scheduled, was_running = child.backoff.upcoming_s, child.process is not None
            supervisor.check()
            if was_running and child.process is None:
                delays.append(scheduled)
            return len(delays) >= 4

        eventually_blocking(four_deaths_seen, 60, lambda: f"four deaths, seen {delays}", every=0.005)
    finally:
        supervisor.stop()
    assert delays == [0.05, 0.1, 0.2, 0.2]
