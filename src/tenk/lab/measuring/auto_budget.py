"""`cpu_budget = "auto"`: the largest CPU budget at which every rung's target, not the generator or the
target's dependencies, is what runs out.

Before the rungs, each rung is served once unbudgeted at a light rate (`PROBE_RATE`) for a few seconds,
and three figures are read per request: the target's CPU, its dependencies' (Postgres, Redis, the mock
vendor, workers), and the generator's. At a budget of B cores the target saturates at B / target_ms
requests a second, so:

- the generator, at that rate, must stay under `GENERATOR_SHARE` of its cores:
  B <= GENERATOR_SHARE * generator_cores * target_ms / generator_ms;
- the target and its dependencies share the target's cores, and must leave them headroom
  (`CORE_SHARE`), or the core, not the quota, would be the limit:
  B * (1 + dependencies_ms / target_ms) <= CORE_SHARE * target_cores.

The budget is the smallest of those limits over every rung, rounded down to `STEP_M`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from tenk.lab.errors import LabError

# How hard the generator may work: k6's latency figures bend before its core is full.
GENERATOR_SHARE = 0.6
# What the target and its dependencies may use of the target's cores at the target's ceiling.
CORE_SHARE = 0.9
STEP_M = 50
MIN_M = 50
PROBE_RATE = 100.0
PROBE_S = 4.0
# Below this many cores a machine cannot give the generator a core and the target an unshared one:
# the default budget is "auto" there, and "none" (as before) on larger machines.
AUTO_BELOW_CORES = 4
DEFAULT_ENV = "TENK_LAB_CPU_BUDGET"


def default_budget(env: Mapping[str, str], cores: int | None = None) -> str:
    """The budget of rungs that set none: TENK_LAB_CPU_BUDGET, else "auto" below 4 cores, else "none"."""
    if env.get(DEFAULT_ENV):
        return env[DEFAULT_ENV]
    return "auto" if (cores or os.cpu_count() or 1) < AUTO_BELOW_CORES else "none"


@dataclass(frozen=True)
class Probe:
    """One rung served unbudgeted at a light rate: CPU ms per request, by party."""

    label: str
    target_ms: float
    dependencies_ms: float
    generator_ms: float

    @classmethod
    def from_cpu_ms(cls, label: str, cpu_ms: Mapping[str, float], generator_ms: float) -> Probe:
        if not cpu_ms.get("target") or generator_ms <= 0:
            raise LabError(
                f"cpu_budget = 'auto': the probe of {label!r} measured no CPU per request "
                '(no request answered, or the target was not sampled): set a budget, e.g. cpu_budget = "500m"'
            )
        generators = ("k6", "wrk")
        dependencies = sum(ms for role, ms in cpu_ms.items() if role != "target" and role not in generators)
        return cls(label, cpu_ms["target"], dependencies, generator_ms)

    def limit_cores(self, generator_cores: int, target_cores: int) -> tuple[float, str]:
        """The largest budget this rung allows, and which rule set it."""
        by_generator = GENERATOR_SHARE * generator_cores * self.target_ms / self.generator_ms
        by_cores = CORE_SHARE * target_cores / (1 + self.dependencies_ms / self.target_ms)
        if by_generator <= by_cores:
            return by_generator, f"the generator under {GENERATOR_SHARE:.0%} of its {generator_cores} core(s)"
        return by_cores, f"target and dependencies within {CORE_SHARE:.0%} of {target_cores} core(s)"

    def describe(self) -> str:
        return (
            f"{self.label}: target {self.target_ms:.3f}, dependencies {self.dependencies_ms:.3f}, "
            f"generator {self.generator_ms:.3f} CPU ms a request"
        )


@dataclass(frozen=True)
class AutoBudget:
    millicores: int
    probes: tuple[Probe, ...]
    limits: tuple[tuple[float, str], ...]

    def describe(self) -> str:
        lines = [f'cpu_budget = "auto" chose {self.millicores}m: the largest budget every rung allows, from']
        for probe, (cores, rule) in zip(self.probes, self.limits, strict=True):
            lines.append(f"  {probe.describe()} -> at most {cores * 1000:.0f}m ({rule})")
        return "\n".join(lines)


def choose_budget(probes: list[Probe], generator_cores: int, target_cores: int) -> AutoBudget:
    if not probes:
        raise LabError("cpu_budget = 'auto' needs at least one rung to probe")
    limits = tuple(probe.limit_cores(generator_cores, target_cores) for probe in probes)
    lowest = min(cores for cores, _ in limits)
    millicores = max(MIN_M, math.floor(lowest * 1000 / STEP_M) * STEP_M)
    return AutoBudget(millicores, tuple(probes), limits)


RULE = (
    f'cpu_budget = "auto": before the rungs, each rung is served unbudgeted at {PROBE_RATE:g} req/s for '
    f"{PROBE_S:g}s; the budget is the largest (in steps of {STEP_M}m) at which every rung's target "
    f"saturates while the generator stays under {GENERATOR_SHARE:.0%} of its cores and the target with its "
    f"dependencies within {CORE_SHARE:.0%} of the target's cores"
)
