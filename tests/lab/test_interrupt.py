"""Ctrl-C in the middle of a measurement stops every process the lab started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.waiting import eventually_blocking

REPO = Path(__file__).resolve().parents[2]


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def command(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# Started with SIGINT ignored is what `tenk lab run ... &` in a script, and some CI runners, give it.
@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint-default", "sigint-ignored-at-start"])
def test_ctrl_c_mid_run_stops_the_target_and_the_generator(tmp_path: Path, sigint_ignored: bool) -> None:
    (tmp_path / "work.toml").write_text('[[endpoint]]\nname = "work"\npath = "/work"\nweight = 1\n')
    ladder = tmp_path / "long.toml"
    ladder.write_text(
        'name = "long"\n[defaults]\ntarget = "tests.lab.semaphore_app:app"\nserver = "uvicorn"\n'
        'mix = "work.toml"\nrate = 20\nduration_s = 120\nwarmup_s = 0\n[[rung]]\nlabel = "a"\n'
    )
    lab = subprocess.Popen(
        [str(Path(sys.executable).parent / "tenk"), "lab", "run", str(ladder), "--quiet", "--results", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO), "SEM_PERMITS": "4", "SEM_SLEEP_MS": "10"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_ignore_sigint if sigint_ignored else None,
    )
    try:

        def started_k6() -> list[psutil.Process]:
            started = descendants(lab.pid)
            return started if any("k6" in command(p) for p in started) else []

        started = eventually_blocking(
            started_k6,
            60,
            lambda: f"the lab to start k6, among {[command(p) for p in descendants(lab.pid)]}",
            every=0.2,
        )
        names = [command(p) for p in started]
        assert any("semaphore_app" in name for name in names), names
        assert any("k6" in name for name in names), names
        lab.send_signal(signal.SIGINT)
        output = lab.communicate(timeout=30)[0].decode()
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
    assert lab.returncode != 0
    assert "interrupted: every process the lab started has been stopped" in output
    _, alive = psutil.wait_procs(started, timeout=5)
    assert alive == [], [p.pid for p in alive]


@pytest.mark.slow
def test_ctrl_c_keeps_what_finished_as_partial_results(tmp_path: Path) -> None:
    (tmp_path / "work.toml").write_text('[[endpoint]]\nname = "work"\npath = "/work"\nweight = 1\n')
    ladder = tmp_path / "two.toml"
    ladder.write_text(
        'name = "two"\n[defaults]\ntarget = "tests.lab.semaphore_app:app"\nserver = "uvicorn"\n'
        'mix = "work.toml"\nrate = 20\nwarmup_s = 0\n'
        '[[rung]]\nlabel = "short"\nduration_s = 3\n[[rung]]\nlabel = "long"\nduration_s = 120\n'
    )
    argv = [str(Path(sys.executable).parent / "tenk"), "lab", "run", str(ladder), "--quiet", "--repeats", "1"]
    lab = subprocess.Popen(
        [*argv, "--results", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO), "SEM_PERMITS": "4", "SEM_SLEEP_MS": "10"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        eventually_blocking(
            lambda: list(tmp_path.glob("two-*/rung-01-repeat-1.json")),
            120,
            "the first rung's result to be kept",
            every=0.2,
        )
        lab.send_signal(signal.SIGINT)
        output = lab.communicate(timeout=60)[0].decode()
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
    assert lab.returncode != 0, output
    [run] = tmp_path.glob("two-*")
    results = json.loads((run / "results.json").read_text())
    assert results["partial"] == "the run stopped after 1 of 2 rung measurements"
    assert [rung["label"] for rung in results["rungs"]] == ["short"]
    assert "Partial results" in (run / "report.md").read_text()
