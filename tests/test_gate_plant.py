"""`benchmarks/gate_plant.py`: the lab gate's planted CPU regression burns the fraction it says of the CPU a
request costs, calibrated in its own process; and its ladders are CI's, planted on the B side only.

No clock is faked: the arithmetic is checked on given figures, and the real wrapper against inequalities
that hold whatever the machine's load (one interval of process CPU time inside another), never a duration."""

from __future__ import annotations

import asyncio
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from benchmarks.gate_plant import NOT_COUNTED, Calibration, Planted, Receive, Scope, Send, planted, planted_ladder, spin

from tenk.lab.definition.ladder import load_ladder

CI_LADDER = Path(__file__).resolve().parents[1] / "src" / "tenk" / "lab" / "examples" / "local-cache-fixed.toml"
INNER_S = 0.0005  # the CPU the test's own app burns a request


def test_the_spin_is_the_fraction_of_the_windows_mean_cpu_a_request() -> None:
    calibration = Calibration(0.10, skip=2, window=4)
    # Process CPU at each request's start: the window runs from the 3rd request (1.0 s) to the 7th (1.8 s).
    burns = [calibration.count(cpu_s) for cpu_s in (0.1, 0.5, 1.0, 1.2, 1.4, 1.6, 1.8)]
    assert burns == [0.0] * 7
    assert calibration.spin_s == pytest.approx(0.10 * 0.8 / 4)
    assert calibration.count(5.0) == pytest.approx(0.02)


def test_a_spin_burns_at_least_the_cpu_it_is_asked_for() -> None:
    before = time.thread_time()
    spin(0.02)
    assert time.thread_time() - before >= 0.02


async def _inner(scope: Scope, receive: Receive, send: Send) -> None:
    spin(INNER_S)


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _send(message: MutableMapping[str, Any]) -> None:
    pass


def _request(path: str = "/products/1") -> Scope:
    return {"type": "http", "path": path}


def test_the_wrapper_calibrates_on_its_own_process_and_then_burns_that_fraction() -> None:
    async def scenario() -> tuple[Calibration, float, float]:
        app = Planted(_inner, 0.5)
        calibration = app.calibration
        for _ in range(calibration.skip):
            await app(_request(), _receive, _send)
        # The process CPU of the whole window, read around it: the wrapper's reading lies inside.
        window_start = time.process_time()
        for _ in range(calibration.window):
            await app(_request(), _receive, _send)
        await app(_request(), _receive, _send)  # the request that closes the window
        window_s = time.process_time() - window_start
        before = time.thread_time()
        await app(_request(), _receive, _send)
        return calibration, window_s, time.thread_time() - before

    calibration, window_s, planted_s = asyncio.run(scenario())
    assert calibration.spin_s is not None
    # Each request of the window burnt at least INNER_S; the wrapper's window lies inside the test's.
    assert 0.5 * INNER_S <= calibration.spin_s <= 0.5 * window_s / calibration.window
    # A planted request burns the app's own CPU and the spin on top.
    assert planted_s >= INNER_S + calibration.spin_s


def test_the_labs_own_requests_are_neither_counted_nor_planted() -> None:
    app = Planted(_inner, 0.5)

    async def scenario() -> None:
        for path in NOT_COUNTED:
            await app(_request(path), _receive, _send)

    asyncio.run(scenario())
    assert app.calibration.seen == 0


def test_an_unplanted_side_is_the_app_itself() -> None:
    assert planted(_inner, 0.0) is _inner


def test_the_b_side_serves_the_wrapper_by_cis_server_command_and_the_a_side_is_cis_ladder(tmp_path: Path) -> None:
    ci = load_ladder(CI_LADDER)
    same = load_ladder(planted_ladder(CI_LADDER, tmp_path / "a", 0.0))
    assert [rung.config for rung in same.rungs] == [rung.config for rung in ci.rungs]
    b = load_ladder(planted_ladder(CI_LADDER, tmp_path / "b", 0.05, rungs=1, duration_s=5))
    (rung,) = b.rungs
    assert rung.config.is_tenk
    assert rung.config.command[-2:] == ("--factory", "benchmarks.gate_plant:create_app")
    assert rung.config.env["TENK_GATE_PLANT"] == "0.05"
    assert rung.config.duration_s == 5
