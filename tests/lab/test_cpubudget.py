"""The target's CPU budget: a cgroup quota that really caps a busy process, and plain fallbacks."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tenk.lab.errors import LabError
from tenk.lab.processes.cpubudget import (
    CpuBudget,
    NoBudget,
    check_budget_fits,
    open_budget,
    parse_millicores,
)
from tenk.lab.processes.servers import READY_TIMEOUT_S, ready_timeout_s

BUSY_LOOP = "while True: pass"
WINDOW_S = 2.0


def test_planted_busy_loop_is_throttled_to_its_budget() -> None:
    budget = open_budget(200)
    if isinstance(budget, NoBudget):
        pytest.skip(budget.label)
    assert isinstance(budget, CpuBudget)
    proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        budget.place(proc.pid)
        process = psutil.Process(proc.pid)
        before, stat_before = process.cpu_times(), budget.throttling()
        # A measuring window, not a wait for an event: the loop's CPU over it is the observation.
        time.sleep(WINDOW_S)
        after, stat_after = process.cpu_times(), budget.throttling()
    finally:
        proc.kill()
        proc.wait()
        budget.remove()
    cores = (after.user + after.system - before.user - before.system) / WINDOW_S
    # The quota caps the loop at 0.2 cores; the error is one period's overrun (10 ms) plus the
    # kernel's 10 ms accounting tick per reading, 0.02 s of 2 s = 0.01 cores, doubled for safety.
    # Below, a shared 2-core machine may give the loop less than its budget, so only "it ran".
    assert 0.05 < cores < 0.22, cores
    assert (stat_after - stat_before).throttled > 0


def test_without_a_cpu_controller_the_budget_says_why(tmp_path: Path) -> None:
    budget = open_budget(300, root=tmp_path / "no-cgroups")
    assert isinstance(budget, NoBudget)
    assert budget.label.startswith("no CPU budget: no cgroup cpu controller under ")


def test_a_budget_larger_than_the_cores_left_after_the_generator_is_refused() -> None:
    check_budget_fits(1000, cores=2, generator_cores=1)
    with pytest.raises(LabError, match=r"cpu_budget 1500m exceeds the 1 core\(s\) left"):
        check_budget_fits(1500, cores=2, generator_cores=1)


@pytest.mark.parametrize(("text", "millicores"), [("300m", 300), ("1", 1000), ("1.5", 1500), ("1500m", 1500)])
def test_budgets_read_as_kubernetes_writes_cpu(text: str, millicores: int) -> None:
    assert parse_millicores("cpu_budget", text) == millicores


@pytest.mark.parametrize("text", ["", "0", "0m", "lots", "300 m", "-1", "1.5m"])
def test_a_garbage_budget_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(LabError, match="cpu_budget"):
        parse_millicores("cpu_budget", text)


def test_a_budgeted_target_gets_as_long_to_start_as_its_budget_makes_the_work_take() -> None:
    # Two tenk workers held to 150m took over 45 s to import: the search preset stopped at its tenk rung.
    assert ready_timeout_s(None) == READY_TIMEOUT_S
    assert ready_timeout_s(CpuBudget(1500, Path("/unused"), v2=True)) == READY_TIMEOUT_S
    assert ready_timeout_s(CpuBudget(150, Path("/unused"), v2=True)) == pytest.approx(READY_TIMEOUT_S / 0.15)
