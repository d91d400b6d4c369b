"""Capacity search: the highest arrival rate a target serves within the SLO.

A step passes when p99 <= SLO, errors <= 0.1 %, nothing was dropped or left unanswered, the generator
was not the bottleneck and, for a backlog-stable search (ingest), the stream's backlog was read at both
ends and did not grow.
The search starts from the calibration's estimate of the target's capacity when `cpu_budget = "auto"`
measured one (`SearchPlan.estimate`), else from the ladder's `start_rate`, and grows the rate until a
step fails, then bisects between the last pass and the first fail until they are within `precision` of
each other, or the step budget, fixed before the first step, runs out. A search that did not bracket the
capacity so says why (`stopped`), and its figure is a lower bound, never a capacity.

Each step also says where to look. A passing step's CPU says how far the target is from its cores or its
budget (`grow`): it doubles only while that leaves room, and near its limit it creeps by `precision`. An
overloaded step's goodput is about what the target can serve (`next_rate`). A target that serves a
twentieth of the first rate is found within the budget rather than never (halving alone, from the first
rate down to such a target, took the whole budget). Every step is kept: they are the latency-vs-load curve.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from tenk.lab.documents import CapacityResult, LoadFigures, ServerSample, Step

MAX_ERROR_RATE = 0.001
# k6 start-up, graceful stop and the pause between steps, per step, beyond its measured seconds.
STEP_OVERHEAD_S = 2.5


# A bracket search grows by this factor a step until a rate fails (the CPU a passing step used may steer it
# nearer), then bisects between the last pass and that failure.
GROWTH = 2.0
# How far above the calibration's estimate the capacity may lie, for sizing the search: the estimate comes
# from short probes at the chosen budget, so it falls short (a warm cache, a JIT-free steady state) rather
# than far past.
ESTIMATE_SPAN = 2.0


def bracket_steps(first_rate: float, ceiling: float, precision: float, confirm_failures: bool) -> int:
    """The steps a bracket search needs to find a capacity up to `ceiling` from `first_rate`: the first step,
    one per growth by `GROWTH` until a rate above the capacity fails, then bisections until the bracket
    (`GROWTH` - 1 of the pass wide) is within `precision`; with `confirm_failures`, the first failure and
    every bisection's measured again.

    Sized for the worst case, every bisection's first measurement failing, not for the half a quiet
    machine fails: near the capacity a step's p99 is at its most fragile, and on a busy machine a
    neighbour's burst fails most first measurements there, whether the second passes (a stall) or fails
    too. Sized for half, brief runs of the shipped ladders on a loaded machine of two cores ran out of
    steps one bisection short. The bound is loose, never a cost paid when not needed: a search stops as
    soon as it brackets the capacity, so a quiet machine spends the same steps as before. Skipping the
    second look, for a failure near the last pass or when the steps run short, would save steps by
    letting a stall set the ceiling, which is what the second look is for."""
    growth = max(0, math.ceil(math.log(max(ceiling, first_rate) / first_rate, GROWTH) - 1e-9))
    bisections = max(0, math.ceil(math.log2((GROWTH - 1) / precision) - 1e-9))
    confirmations = 1 + bisections if confirm_failures else 0
    return 1 + growth + bisections + confirmations


# Started from a calibration's estimate of the capacity, the first step asks this share of it: below the
# estimate, so that it passes, and high enough that the passing step's CPU leads near the limit at once.
START_SHARE = 0.7


@dataclass(frozen=True)
class SearchPlan:
    slo_p99_ms: float
    start_rate: float
    step_s: float
    budget_s: float
    max_rate: float = 50_000.0
    precision: float = 0.10
    confirm_failures: bool = True
    # Ingest: a step passes only if the backlog did not grow (what was accepted was also landed).
    backlog_stable: bool = False
    # The capacity the calibration measured before the rungs (`cpu_budget = "auto"`'s probes), if any.
    estimate: float | None = None
    # What the target may use at most (cores, or its CPU budget): a passing step's share of it steers growth.
    target_cores: float | None = None

    @property
    def max_steps(self) -> int:
        return max(2, math.floor(self.budget_s / (self.step_s + STEP_OVERHEAD_S)))

    @property
    def steps_needed(self) -> int:
        """The steps a bracket search needs from `first_rate` (`bracket_steps`): up to `ESTIMATE_SPAN` x the
        calibration's estimate when there is one, else up to `max_rate`."""
        ceiling = min(self.max_rate, self.estimate * ESTIMATE_SPAN) if self.estimate else self.max_rate
        return bracket_steps(self.first_rate, ceiling, self.precision, self.confirm_failures)

    @property
    def first_rate(self) -> float:
        if self.estimate:
            return float(min(self.max_rate, max(1, round(self.estimate * START_SHARE))))
        return min(self.start_rate, self.max_rate)

    def describe(self) -> str:
        start = (
            f"from {self.first_rate:g} req/s ({START_SHARE:.0%} of the calibration's estimate, {self.estimate:,.0f})"
            if self.estimate
            else f"from {self.first_rate:g} req/s"
        )
        short = (
            f" (short of the {self.steps_needed} a bracket search may need from there)"
            if self.max_steps < self.steps_needed
            else ""
        )
        return (
            f"capacity search: at most {self.max_steps} steps of {self.step_s:g}s{short} "
            f"(<= {self.budget_s:g}s in all), {start}, growing then bisecting "
            f"to {self.precision:.0%}; pass = p99 <= {self.slo_p99_ms:g} ms, errors <= {MAX_ERROR_RATE:.1%}, "
            "none dropped or unanswered, generator not bound"
            + ("; backlog read and not growing (accepted = landed)" if self.backlog_stable else "")
            + "; steered by the CPU a passing step used and by what a failing step served"
            + ("; a failing rate is measured twice unless it served under half" if self.confirm_failures else "")
        )


def step_failures(figures: LoadFigures, slo_p99_ms: float) -> list[str]:
    reasons = []
    if figures.p99_ms > slo_p99_ms:
        reasons.append(f"p99 {figures.p99_ms:.1f} ms > {slo_p99_ms:g} ms")
    if figures.error_rate > MAX_ERROR_RATE:
        reasons.append(f"errors {figures.error_rate:.2%} > {MAX_ERROR_RATE:.1%}")
    if figures.unanswered:
        # Answers slower than the step and its grace: the worst latencies, missing from the p99 above.
        reasons.append(f"unanswered: {figures.unanswered} requests had no answer when the generator stopped")
    reasons += figures.generator_reasons
    return reasons


def overwhelmed(figures: LoadFigures) -> bool:
    """Served under half the offered rate: a stall (a GC pause, a neighbour's burst) can break a short
    step's p99 but not halve what it served, so such a failure needs no second look."""
    return figures.offered_rps > 0 and figures.rps < figures.offered_rps / 2


def next_rate(low: float, high: float, served_at_high: float, precision: float) -> float:
    """The next rate: halve (nothing passed yet) or bisect, steered by what the lowest failing rate's step
    served. Overloaded, a target serves about what it can: with nothing passed yet, try a little under
    that; once a rate passed, try no further above the higher of it and that goodput than `precision`.
    But a target that collapses when overloaded serves far less than it can: once a rate `precision`
    above that goodput has passed, the goodput has said all it can, and the search bisects, by ratio while
    the bounds are over 2x apart. (Creeping up by `precision` a step from a collapse far below what it
    could serve, a direct-INSERT app ran out of steps at a fraction of its capacity.)
    Whole req/s, at least 1, and above the last pass: at a few req/s 10 % rounds back to the pass itself,
    which would end the search there with every rate up to the failure untried."""
    if low == 0:
        rate = high / 2
        if served_at_high > 0:
            rate = min(rate, served_at_high * (1 - precision))
        return float(max(1, round(rate)))
    steered = served_at_high * (1 + precision)
    if low < steered:
        rate = min((low + high) / 2, max(low * (1 + precision), steered))
    else:
        rate = math.sqrt(low * high) if high > 2 * low else (low + high) / 2
    return float(max(low + 1, round(rate)))


def steered(plan: SearchPlan, rate: float, server: ServerSample) -> bool:
    """Whether the CPU the target used at `rate` puts its limit nearer than `GROWTH` x `rate`."""
    used = server.cpu_cores_mean
    return bool(plan.target_cores and used and rate * plan.target_cores / used < rate * GROWTH)


def grow(plan: SearchPlan, rate: float, server: ServerSample, misled: int = 0) -> float:
    """The next rate after a pass, with no failure yet: `GROWTH` x it, unless the CPU the target used says
    its limit is nearer. At `used` of its `target_cores` the target's CPU runs out near rate x target_cores
    / used; with fixed costs in `used` that projection falls short of the limit, never past it, so the next
    step goes there, but at least `precision` above the pass. A target that waits rather than computes
    (blocking calls, a vendor) uses little CPU, and grows as before.
    `misled` counts the passes so far at a rate the CPU had steered to: each says the projection fell
    short (the CPU the target used was not all its own work, or not a limit), and each squares the least
    step, (1 + precision), (1 + precision)^2, ... up to `GROWTH`: a projection that keeps falling short
    costs a few steps, not one step per `precision` (a search that crept 10 % a step ran out of steps
    with every rate passed)."""
    grown = rate * GROWTH
    least = min(GROWTH, (1 + plan.precision) ** (2**misled))
    used = server.cpu_cores_mean
    if not plan.target_cores or not used:
        return grown
    projected = rate * plan.target_cores / used
    return float(max(rate + 1, round(max(rate * least, min(grown, projected)))))


def _bracket(low: float, high: float | None, precision: float) -> str:
    """Where a search left the capacity, in words: for one that converged, the precision it reached."""
    if high is None:
        return f"every rate passed, up to {low:,.0f} req/s"
    if low == 0:
        return f"no rate passed, down to {high:,.0f} req/s"
    return (
        f"last pass {low:,.0f} req/s, lowest failure {high:,.0f} ({high / low - 1:.0%} apart, "
        f"for a precision of {precision:.0%})"
    )


Measure = Callable[[float, int], tuple[LoadFigures, ServerSample]]
# Further reasons a step fails, from its server sample (e.g. the ingest backlog grew).
Judge = Callable[[ServerSample], list[str]]


def search(plan: SearchPlan, measure: Measure, judge: Judge | None = None) -> CapacityResult:
    """Run the search; `measure(rate, step_number)` runs one step and returns its figures and server stats."""

    def failures(figures: LoadFigures, server: ServerSample) -> list[str]:
        return step_failures(figures, plan.slo_p99_ms) + (judge(server) if judge is not None else [])

    started = time.monotonic()
    steps: list[Step] = []
    low = 0.0  # highest rate that passed
    high: float | None = None  # lowest rate that failed
    high_reasons: list[str] = []
    served_at_high = 0.0
    rate = plan.first_rate
    converged = False
    stopped = ""
    misled = 0  # passes at a rate the CPU steered to (`grow`)
    was_steered = False
    while len(steps) < plan.max_steps:
        figures, server = measure(rate, len(steps) + 1)
        reasons = failures(figures, server)
        steps.append(Step(rate=rate, figures=figures, server=server, passed=not reasons, reasons=reasons))
        if reasons and plan.confirm_failures and len(steps) < plan.max_steps and not overwhelmed(figures):
            # One stall (a neighbour on the target's core, a GC pause) can fail a short step;
            # a rate fails only if it fails twice in a row. Both steps are kept.
            steps[-1].reasons = [*reasons, "unconfirmed: measured again"]
            figures, server = measure(rate, len(steps) + 1)
            reasons = failures(figures, server)
            steps.append(Step(rate=rate, figures=figures, server=server, passed=not reasons, reasons=reasons))
        if not reasons:
            low = max(low, rate)
        elif high is None or rate < high:
            high, high_reasons, served_at_high = rate, reasons, figures.rps
        if high is None:
            if rate >= plan.max_rate:
                stopped = f"every rate passed, up to {plan.max_rate:,.0f} req/s, the most it offers (max_rate)"
                break
            misled += was_steered
            was_steered = steered(plan, rate, server)
            rate = min(grow(plan, rate, server, misled), plan.max_rate)
            continue
        if (low > 0 and high - low <= plan.precision * low) or high <= 1:
            converged = True  # bracketed, or nothing passed even at 1 req/s
            break
        rate = next_rate(low, high, served_at_high, plan.precision)
        if rate in (low, high):
            converged = True
            break
    else:
        stopped = f"ran out of its {plan.max_steps} steps: {_bracket(low, high, plan.precision)}"
    # When only the generator failed at the ceiling, the server was never shown to fail.
    generator_limited = bool(high_reasons) and not any(
        r.startswith(("p99", "errors", "unanswered", "backlog")) for r in high_reasons
    )
    return CapacityResult(
        capacity=low,
        converged=converged,
        limited_by=high_reasons,
        generator_limited=generator_limited,
        plan=plan.describe(),
        elapsed_s=round(time.monotonic() - started, 1),
        steps=steps,
        stopped=stopped,
        reached=_bracket(low, high, plan.precision),
    )
