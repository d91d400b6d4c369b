"""`cpu_budget = "auto"`: the largest CPU budget at which every rung's target, not the generator or the
target's dependencies, is what runs out.

Before the rungs, each rung is served unbudgeted at a light rate (`PROBE_RATE`) and then at a higher one
(`PROBE_STEP` times it, kept under half a core of the target), a few seconds each, and the CPU of three
parties is read at both: the target's, its dependencies' (Postgres, Redis, the mock vendor, workers),
and the generator's. Each party's cores at a rate r are `fixed + r * marginal`: the two rates give both
(`Cost.from_rates`). One light rate alone overstated what a request costs: at that rate the fixed costs
(the metrics sampler, the ingest worker's polling, the pools' keep-alives) are a large part of tenk's CPU
a request, so the budget was sized for far more generator work than it really takes, and the cache-on rung
of the local-cache example came out limited by k6 (issue 24). A target that a higher rate would saturate is
probed at the light rate alone, its fixed cost taken as nothing (it is small beside such a request).

At a budget of B cores the target saturates at R = (B - target.fixed) / target.marginal requests a
second, so:

- the generator, at R, must stay under `GENERATOR_SHARE` of its cores;
- the target and its dependencies share the target's cores, and must leave them headroom
  (`CORE_SHARE`), or the core, not the quota, would be the limit: B + dependencies at R <= CORE_SHARE * cores.

The budget is the smallest of those limits over every rung, rounded down to `STEP_M`.

Two light rates still guess at the saturation rate: on the local-cache example the fitted costs moved
between runs, and a budget of 550m left k6 dropping arrivals on the cached rung once in five. So the
choice is then tried where it matters (`OperatingPoint`): the rung the budget lets run fastest is served
under it at the rate it should saturate there, and if the target used less than its budget (a request is
cheaper than the probes said, so it saturates at a higher rate) or k6 was busier than expected, the k6
share at the target's real saturation is projected from what was measured, and the budget lowered to keep
it under `GENERATOR_SHARE`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from tenk.lab.errors import LabError

# How hard the generator may work: k6's latency figures bend before its core is full.
GENERATOR_SHARE = 0.6
# What the target and its dependencies may use of the target's cores at the target's ceiling.
CORE_SHARE = 0.9
STEP_M = 50
MIN_M = 50
PROBE_RATE = 100.0
PROBE_S = 4.0
# The second rate is this many times the first, if the target stays under `PROBE_TARGET_CORES` there.
PROBE_STEP = 10.0
PROBE_TARGET_CORES = 0.5
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
class Cost:
    """One party's CPU at a request rate r: `fixed` cores whatever the rate, plus `marginal_ms` a request."""

    marginal_ms: float
    fixed_cores: float = 0.0

    @classmethod
    def from_rates(cls, low_rate: float, low_ms: float, high_rate: float, high_ms: float) -> Cost:
        """From CPU ms per request measured at two rates. Noise can make the line absurd (a negative
        fixed cost, or none at all per request): then the higher rate's average, which fixed costs
        inflate least, is taken as it is."""
        marginal = (high_ms * high_rate - low_ms * low_rate) / (high_rate - low_rate)
        fixed = (low_ms - marginal) * low_rate / 1000
        if marginal <= 0 or fixed < 0:
            return cls(high_ms)
        return cls(marginal, fixed)

    def cores(self, rate: float) -> float:
        return self.fixed_cores + rate * self.marginal_ms / 1000


@dataclass(frozen=True)
class Probe:
    """One rung served unbudgeted at light rates: each party's CPU cost."""

    label: str
    target: Cost
    dependencies: Cost
    generator: Cost

    @classmethod
    def from_cpu_ms(cls, label: str, cpu_ms: Mapping[str, float], generator_ms: float) -> Probe:
        """One rate's CPU ms per request by role, taken as marginal costs with no fixed part."""
        target, dependencies = split_roles(label, cpu_ms, generator_ms)
        return cls(label, Cost(target), Cost(dependencies), Cost(generator_ms))

    @classmethod
    def from_two_rates(
        cls,
        label: str,
        low: tuple[float, Mapping[str, float], float],
        high: tuple[float, Mapping[str, float], float],
    ) -> Probe:
        """(rate, CPU ms per request by role, generator ms per request) at two rates."""
        (low_rate, low_ms, low_generator), (high_rate, high_ms, high_generator) = low, high
        low_target, low_dependencies = split_roles(label, low_ms, low_generator)
        high_target, high_dependencies = split_roles(label, high_ms, high_generator)
        return cls(
            label,
            Cost.from_rates(low_rate, low_target, high_rate, high_target),
            Cost.from_rates(low_rate, low_dependencies, high_rate, high_dependencies)
            if low_dependencies and high_dependencies
            else Cost(high_dependencies),
            Cost.from_rates(low_rate, low_generator, high_rate, high_generator),
        )

    def limit_cores(self, generator_cores: int, target_cores: int) -> tuple[float, str]:
        """The largest budget this rung allows, and which rule set it."""
        target, dependencies, generator = self.target, self.dependencies, self.generator
        # The rate at which the generator reaches its share, and the budget that saturates the target there.
        generator_room = max(0.0, GENERATOR_SHARE * generator_cores - generator.fixed_cores)
        generator_rate = generator_room * 1000 / generator.marginal_ms
        by_generator = target.cores(generator_rate)
        # B + dependencies.cores((B - target.fixed) / target.marginal) = CORE_SHARE * target_cores, for B.
        ratio = dependencies.marginal_ms / target.marginal_ms
        by_cores = (CORE_SHARE * target_cores - dependencies.fixed_cores + target.fixed_cores * ratio) / (1 + ratio)
        if by_generator <= by_cores:
            return by_generator, f"the generator under {GENERATOR_SHARE:.0%} of its {generator_cores} core(s)"
        return by_cores, f"target and dependencies within {CORE_SHARE:.0%} of {target_cores} core(s)"

    def describe(self) -> str:
        def cost(party: Cost) -> str:
            fixed = f" + {party.fixed_cores * 1000:.0f}m fixed" if party.fixed_cores else ""
            return f"{party.marginal_ms:.3f}{fixed}"

        return (
            f"{self.label}: target {cost(self.target)}, dependencies {cost(self.dependencies)}, "
            f"generator {cost(self.generator)} CPU ms a request"
        )


def split_roles(label: str, cpu_ms: Mapping[str, float], generator_ms: float) -> tuple[float, float]:
    """(target, dependencies) CPU ms per request of a probe's figures by role."""
    if not cpu_ms.get("target") or generator_ms <= 0:
        raise LabError(
            f"cpu_budget = 'auto': the probe of {label!r} measured no CPU per request "
            '(no request answered, or the target was not sampled): set a budget, e.g. cpu_budget = "500m"'
        )
    generators = ("k6", "wrk")
    dependencies = sum(ms for role, ms in cpu_ms.items() if role != "target" and role not in generators)
    return cpu_ms["target"], dependencies


def second_probe_rate(low_rate: float, target_ms: float) -> float | None:
    """The higher probe rate: `PROBE_STEP` times the light one, unless the target would pass
    `PROBE_TARGET_CORES` there (going by the light rate's figure, which overstates it); None when no
    rate at least twice the light one keeps it under."""
    high = min(PROBE_STEP * low_rate, PROBE_TARGET_CORES * 1000 / target_ms)
    return high if high >= 2 * low_rate else None


@dataclass(frozen=True)
class OperatingPoint:
    """One rung served under the chosen budget at the rate it should saturate the target there."""

    label: str
    rate: float
    target_cores: float  # mean cores the target used
    generator_util: float  # share of the generator's cores it used


@dataclass(frozen=True)
class AutoBudget:
    millicores: int
    probes: tuple[Probe, ...]
    limits: tuple[tuple[float, str], ...]
    # What trying the budget at its operating point found, once tried.
    checked: str = ""

    def saturation_rates(self) -> list[float]:
        """The rate at which each probed rung's target should spend this budget: R = (B - fixed) / marginal.
        The capacity searches start from it."""
        budget = self.millicores / 1000
        return [max(0.0, budget - probe.target.fixed_cores) * 1000 / probe.target.marginal_ms for probe in self.probes]

    def fastest(self) -> tuple[int, float]:
        """Which probed rung (its index) this budget lets run at the highest rate, and that rate: where k6
        works hardest."""
        rates = self.saturation_rates()
        index = max(range(len(rates)), key=rates.__getitem__)
        return index, rates[index]

    def confirmed(self, point: OperatingPoint) -> AutoBudget:
        """The budget once tried at `point`: kept, or lowered so that k6 stays under its share at the rate
        the target really saturates (projected from the target's and k6's use there, both about linear)."""
        budget = self.millicores / 1000
        used = min(point.target_cores, budget)
        seen = (
            f"tried at {point.rate:.0f} req/s on {point.label!r}: target {used * 1000:.0f}m of "
            f"{self.millicores}m, generator at {point.generator_util:.0%} of its cores"
        )
        if used <= 0:
            return replace(self, checked=f"{seen}; nothing to project from, kept")
        projected = point.generator_util * budget / used
        if projected <= GENERATOR_SHARE:
            return replace(self, checked=f"{seen}, {projected:.0%} at the target's saturation: kept")
        # (+1e-9: a budget exactly on a step must not round down to the one below through float error)
        lowered = max(MIN_M, math.floor(self.millicores * GENERATOR_SHARE / projected / STEP_M + 1e-9) * STEP_M)
        return replace(
            self,
            millicores=lowered,
            checked=f"{seen}, {projected:.0%} at the target's saturation: lowered from {self.millicores}m",
        )

    def describe(self) -> str:
        lines = [f'cpu_budget = "auto" chose {self.millicores}m: the largest budget every rung allows, from']
        for probe, (cores, rule) in zip(self.probes, self.limits, strict=True):
            lines.append(f"  {probe.describe()} -> at most {cores * 1000:.0f}m ({rule})")
        if self.checked:
            lines.append(f"  then {self.checked}")
        return "\n".join(lines)


def choose_budget(probes: list[Probe], generator_cores: int, target_cores: int) -> AutoBudget:
    if not probes:
        raise LabError("cpu_budget = 'auto' needs at least one rung to probe")
    limits = tuple(probe.limit_cores(generator_cores, target_cores) for probe in probes)
    lowest = min(cores for cores, _ in limits)
    millicores = max(MIN_M, math.floor(lowest * 1000 / STEP_M) * STEP_M)
    return AutoBudget(millicores, tuple(probes), limits)


RULE = (
    f'cpu_budget = "auto": before the rungs, each rung is served unbudgeted at {PROBE_RATE:g} req/s and at '
    f"up to {PROBE_STEP:g} times that, {PROBE_S:g}s each, to part each party's fixed CPU from its CPU a "
    f"request; the budget is the largest (in steps of {STEP_M}m) at which every rung's target "
    f"saturates while the generator stays under {GENERATOR_SHARE:.0%} of its cores and the target with its "
    f"dependencies within {CORE_SHARE:.0%} of the target's cores; then it is tried on the rung it lets run "
    f"fastest, at the rate that should saturate the target, and lowered if the generator would pass "
    f"{GENERATOR_SHARE:.0%} at the target's real saturation"
)
