"""Capacity search: the highest arrival rate a target serves within the SLO.

A step passes when p99 <= SLO, errors <= 0.1 %, nothing was dropped or left unanswered, the generator
was not the bottleneck and, for a backlog-stable search (ingest), the stream's backlog was read at both
ends and did not grow.
The search doubles the rate until a step fails, then bisects between the last pass and the first
fail until they are within `precision` of each other, or the step budget, fixed before the first
step, runs out. An overloaded step also says where to look: what the target served while overloaded
(its goodput) is about what it can serve, so the next rate stays near it (`next_rate`). A target that
serves a twentieth of the first rate is found within the budget rather than never (halving from 200
req/s to one that serves 11 took the whole budget). Every step is kept: they are the latency-vs-load curve.
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

    @property
    def max_steps(self) -> int:
        return max(2, math.floor(self.budget_s / (self.step_s + STEP_OVERHEAD_S)))

    def describe(self) -> str:
        return (
            f"capacity search: at most {self.max_steps} steps of {self.step_s:g}s "
            f"(<= {self.budget_s:g}s in all), from {self.start_rate:g} req/s, doubling then bisecting "
            f"to {self.precision:.0%}; pass = p99 <= {self.slo_p99_ms:g} ms, errors <= {MAX_ERROR_RATE:.1%}, "
            "none dropped or unanswered, generator not bound"
            + ("; backlog read and not growing (accepted = landed)" if self.backlog_stable else "")
            + "; steered by what a failing step served"
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
    the bounds are over 2x apart. (Creeping up 10 % a step from a collapse at 10 req/s, a direct-INSERT
    app good for about 70 ran out of steps at 15.)
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
    rate = min(plan.start_rate, plan.max_rate)
    converged = False
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
                converged = True  # the target kept up with the most we would offer
                break
            rate = min(rate * 2, plan.max_rate)
            continue
        if low > 0 and high - low <= plan.precision * low:
            converged = True
            break
        if high <= 1:
            converged = True
            break
        rate = next_rate(low, high, served_at_high, plan.precision)
        if rate in (low, high):
            converged = True
            break
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
    )
