"""A CPU budget for the target: its processes run in a cgroup whose quota caps the cores they may use.

The target's capacity then means "requests per second at this many millicores", the unit
Kubernetes sizes pods in, instead of "whatever this shared machine had spare". Children inherit
their parent's cgroup, so placing the target's pid before it forks its workers budgets all of them.

Where no quota can be set (no cgroup controller, not root, macOS) `open_budget` returns a
`NoBudget` whose reason the run prints and labels the verdict with, and the rung runs as before.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tenk.lab.errors import LabError

# The quota period. A group that spends its quota early waits for the next period, so the longest
# stall at budget b is (1 - b) * period: with the kernel's 100 ms default a 300m budget can stall a
# request 70 ms, near a 100 ms p99 SLO; at 10 ms the stall is at most 7 ms. Shorter periods cost
# scheduler work per period, and 10 ms is still well above the 1 ms the kernel accepts.
PERIOD_US = 10_000

_MILLICORES = re.compile(r"^(?:(\d+)m|(\d+(?:\.\d+)?))$")
_GROUP_NAME = "tenk-lab-{pid}"


def parse_millicores(field: str, text: str) -> int:
    """A budget as Kubernetes writes CPU: "300m", "1", "1.5", "1500m" -> millicores."""
    match = _MILLICORES.match(text.strip())
    millicores = int(match[1]) if match and match[1] else round(float(match[2]) * 1000) if match else 0
    if millicores <= 0:
        raise LabError(f'{field} = {text!r}: expected millicores like "300m" or cores like "1.5"')
    return millicores


def check_budget_fits(millicores: int, cores: int, generator_cores: int) -> None:
    """Refuse a budget larger than the cores left once the generator has its own.

    A budget the machine cannot give would be capped by the machine, not the quota, and the
    capacity per core would read as better than it is.
    """
    left = cores - generator_cores
    if millicores > left * 1000:
        raise LabError(
            f"cpu_budget {millicores}m exceeds the {left} core(s) left for the target and its "
            f"dependencies on this {cores}-core machine ({generator_cores} pinned to the generator)"
        )


@dataclass(frozen=True)
class Throttling:
    """cpu.stat's counters; a step reports the difference between two readings."""

    periods: int
    throttled: int
    throttled_s: float

    def __sub__(self, before: Throttling) -> Throttling:
        return Throttling(
            self.periods - before.periods,
            self.throttled - before.throttled,
            self.throttled_s - before.throttled_s,
        )

    def describe(self) -> str:
        share = 100 * self.throttled / self.periods if self.periods else 0.0
        return f"throttled {share:.0f} % of periods, {self.throttled_s:.1f} s"


@dataclass(frozen=True)
class NoBudget:
    """No quota could be set; the rung runs on whatever CPU the machine gives."""

    reason: str

    @property
    def label(self) -> str:
        return f"no CPU budget: {self.reason}"


@dataclass(frozen=True)
class CpuBudget:
    """A cgroup with a CPU quota; `place` a pid in it, read `throttling`, `remove` it afterwards."""

    millicores: int
    path: Path
    v2: bool

    def place(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def throttling(self) -> Throttling:
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        # v2 counts throttled time in microseconds, v1 in nanoseconds.
        throttled_s = int(stat["throttled_usec"]) / 1e6 if self.v2 else int(stat["throttled_time"]) / 1e9
        return Throttling(int(stat["nr_periods"]), int(stat["nr_throttled"]), throttled_s)

    def remove(self) -> None:
        """Remove the group; its processes must have exited (the kernel refuses a busy group)."""
        self.path.rmdir()


def open_budget(millicores: int, root: Path = Path("/sys/fs/cgroup")) -> CpuBudget | NoBudget:
    """Create a cgroup capped at `millicores` under `root`, or say why none can be made."""
    quota_us = millicores * PERIOD_US // 1000
    name = _GROUP_NAME.format(pid=os.getpid())
    if (root / "cgroup.controllers").exists():
        if "cpu" not in (root / "cgroup.controllers").read_text().split():
            return NoBudget(f"the cgroup2 hierarchy at {root} has no cpu controller")
        budget = CpuBudget(millicores, root / name, v2=True)
        files = {"cpu.max": f"{quota_us} {PERIOD_US}"}
    elif (root / "cpu" / "cpu.cfs_quota_us").exists():
        budget = CpuBudget(millicores, root / "cpu" / name, v2=False)
        files = {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota_us)}
    else:
        return NoBudget(f"no cgroup cpu controller under {root}")
    try:
        budget.path.mkdir(exist_ok=True)
        for file, value in files.items():
            (budget.path / file).write_text(value)
    except OSError as exc:
        # Not root, a read-only /sys in a container, or (v2) cpu not delegated to this subtree.
        return NoBudget(f"cannot write {budget.path}: {exc.strerror}")
    return budget
