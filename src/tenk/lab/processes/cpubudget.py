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
import time
from dataclasses import dataclass
from pathlib import Path

from tenk.lab.errors import LabError

# The quota period. A group that spends its quota early waits for the next period, so the longest
# stall at budget b is (1 - b) * period: with the kernel's 100 ms default a 300m budget can stall a
# request 70 ms, near a 100 ms p99 SLO; at 10 ms the stall is at most 7 ms. Shorter periods cost
# scheduler work per period, and 10 ms is still well above the 1 ms the kernel accepts.
PERIOD_US = 10_000

REMOVE_TIMEOUT_S = 5.0
CGROUP_ROOT = Path("/sys/fs/cgroup")

_MILLICORES = re.compile(r"^(?:(\d+)m|(\d+(?:\.\d+)?))$")
_GROUP_NAME = "tenk-lab-{pid}"


def parse_millicores(field: str, text: str) -> int:
    """A budget as Kubernetes writes CPU: "300m", "1", "1.5", "1500m" -> millicores."""
    match = _MILLICORES.match(text.strip())
    millicores = int(match[1]) if match and match[1] else round(float(match[2]) * 1000) if match else 0
    if millicores <= 0:
        raise LabError(f'{field} = {text!r}: expected millicores like "300m" or cores like "1.5"')
    return millicores


def budget_millicores(field: str, text: str) -> int | None:
    """A rung's resolved budget: millicores, or None for "none" (and unset). "auto" is resolved before the
    rungs run (`auto_budget`), so meeting it here is a bug."""
    if text in ("", "none"):
        return None
    if text == "auto":
        raise LabError(f"{field} = 'auto' must be resolved before the rung runs")
    return parse_millicores(field, text)


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

    def as_figures(self) -> dict[str, float]:
        return {"periods": self.periods, "throttled": self.throttled, "throttled_s": round(self.throttled_s, 3)}

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
    period_us: int = PERIOD_US

    @property
    def mechanism(self) -> str:
        return "cgroup v2 cpu.max" if self.v2 else "cgroup v1 cpu.cfs_quota_us"

    def place(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def entered(self, argv: list[str]) -> list[str]:
        """`argv` run from inside the group: the shell moves itself in, then execs `argv` under the same pid.
        Placing the pid after `Popen` returns would race the target's forking of its workers."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def pids(self) -> list[int]:
        return [int(line) for line in (self.path / "cgroup.procs").read_text().split()]

    def throttling(self) -> Throttling:
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        # v2 counts throttled time in microseconds, v1 in nanoseconds.
        throttled_s = int(stat["throttled_usec"]) / 1e6 if self.v2 else int(stat["throttled_time"]) / 1e9
        return Throttling(int(stat["nr_periods"]), int(stat["nr_throttled"]), throttled_s)

    def remove(self) -> None:
        """Remove the group once its processes have gone (the kernel refuses a busy group). A process
        killed a moment ago may still be leaving it: wait for that, briefly."""
        deadline = time.monotonic() + REMOVE_TIMEOUT_S
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def open_budget(millicores: int, root: Path = CGROUP_ROOT, period_us: int = PERIOD_US) -> CpuBudget | NoBudget:
    """Create a cgroup capped at `millicores` under `root`, or say why none can be made."""
    quota_us = millicores * period_us // 1000
    name = _GROUP_NAME.format(pid=os.getpid())
    if (root / "cgroup.controllers").exists():
        if "cpu" not in (root / "cgroup.controllers").read_text().split():
            return NoBudget(f"the cgroup2 hierarchy at {root} has no cpu controller")
        budget = CpuBudget(millicores, root / name, v2=True, period_us=period_us)
        files = [("cpu.max", f"{quota_us} {period_us}")]
    elif (root / "cpu" / "cpu.cfs_quota_us").exists():
        budget = CpuBudget(millicores, root / "cpu" / name, v2=False, period_us=period_us)
        # Unlimited first, so that a group left from an earlier run takes any period, then the quota.
        files = [("cpu.cfs_quota_us", "-1"), ("cpu.cfs_period_us", str(period_us)), ("cpu.cfs_quota_us", str(quota_us))]
    else:
        return NoBudget(f"no cgroup cpu controller under {root}")
    try:
        budget.path.mkdir(exist_ok=True)
        for file, value in files:
            (budget.path / file).write_text(value)
    except OSError as exc:
        # Not root, a read-only /sys in a container, or (v2) cpu not delegated to this subtree.
        return NoBudget(f"cannot write {budget.path}: {exc.strerror}")
    return budget
