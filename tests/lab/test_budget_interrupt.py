"""Ctrl-C in the middle of a budgeted rung leaves no cgroup behind: the kernel keeps an empty group
forever, and each run's would pile up under the cpu controller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tenk.lab.processes.cpubudget import NoBudget, open_budget
from tests.support.waiting import eventually_blocking

REPO = Path(__file__).resolve().parents[2]
# Generous: the lab starts the stack, uvicorn and k6 on a machine other tests are loading too.
START_DEADLINE_S = 120


def _group_dir_or_skip() -> Path:
    """Where the lab's groups are made (cgroup v2's root, or v1's cpu controller), or skip saying why."""
    budget = open_budget(100)
    if isinstance(budget, NoBudget):
        pytest.skip(budget.label)
    budget.remove()
    return budget.path.parent


def _commands(pid: int) -> list[str]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    names = []
    for child in children:
        try:
            names.append(" ".join(child.cmdline()))
        except psutil.Error:
            continue
    return names


@pytest.mark.slow
def test_ctrl_c_mid_rung_removes_the_budgets_group(tmp_path: Path) -> None:
    groups = _group_dir_or_skip()
    (tmp_path / "spin.toml").write_text('[[endpoint]]\nname = "spin"\npath = "/spin"\nweight = 1\n')
    ladder = tmp_path / "long.toml"
    ladder.write_text(
        'name = "long"\n[defaults]\ntarget = "tests.lab.spin_app:app"\nserver = "uvicorn"\nworkers = 2\n'
        'mix = "spin.toml"\nrate = 20\nduration_s = 120\nwarmup_s = 0\ncpu_budget = "200m"\n'
        '[[rung]]\nlabel = "a"\n'
    )
    lab = subprocess.Popen(
        [str(Path(sys.executable).parent / "tenk"), "lab", "run", str(ladder), "--quiet", "--results", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO), "SPIN_MS": "5"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    group = groups / f"tenk-lab-{lab.pid}"
    try:
        eventually_blocking(
            lambda: any("k6" in name for name in _commands(lab.pid)),
            START_DEADLINE_S,
            lambda: f"the lab to start k6, among {_commands(lab.pid)}",
            every=0.2,
        )
        # The target's supervisor and both workers are in the group while the rung runs.
        in_group = [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
        assert len(in_group) >= 3, in_group
        lab.send_signal(signal.SIGINT)
        output = lab.communicate(timeout=60)[0].decode()
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
    assert lab.returncode != 0, output
    assert not group.exists(), f"{group} was left behind\n{output}"
