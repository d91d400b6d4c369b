"""A capacity is a capacity only when its search converged: an unfinished search is a lower bound ("≥ X"),
never target-bound, and every comparison with it is inconclusive. A step whose generator dropped arrivals is
the generator's unless the target was saturated beside a generator with headroom.

The targets are modelled (a function of the rate offered), so the search's path is known exactly; the
figures of the local-cache case are those of its run in issue 49 (300m, k6 at 64-69 % dropping arrivals).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tenk.lab.definition.ladder import Rung, RungConfig
from tenk.lab.documents import (
    GENERATOR,
    TARGET,
    UNCONVERGED,
    BudgetRecord,
    CapacityResult,
    Claim,
    LoadFigures,
    Results,
    RungResult,
    ServerSample,
)
from tenk.lab.measuring.bottleneck import attribute, outside_cores
from tenk.lab.measuring.capacity import (
    ESTIMATE_SPAN,
    START_SHARE,
    STEP_OVERHEAD_S,
    Measure,
    SearchPlan,
    bracket_steps,
    grow,
    search,
)
from tenk.lab.measuring.outcome import rung_result
from tenk.lab.results.compare import compare_rows, regressions
from tenk.lab.results.derivations import compare_rungs, headline, with_judgements
from tenk.lab.results.markdown import markdown
from tenk.lab.results.summary import summarise_rung


def load(rate: float, served: float, p99_ms: float, dropped: int = 0, util: float = 0.3) -> LoadFigures:
    return LoadFigures(
        engine="k6", offered_rps=rate, duration_s=3, requests=round(served * 3), rps=served, p50_ms=2,
        p95_ms=p99_ms / 2, p99_ms=p99_ms, max_ms=p99_ms * 2, errors=0, error_rate=0.0, dropped=dropped,
        generator_cpu_s=util * 3, generator_cores_used=util, generator_util=util, generator_cores=1,
        generator_bound=dropped > 0,
        generator_reasons=[f"{dropped} iterations dropped: k6 could not start them on schedule"] if dropped else [],
    )  # fmt: skip


def budgeted(cores: float, throttled: float) -> ServerSample:
    """The target on CPU 0 under a 300m budget, its quota periods `throttled` of the time."""
    return ServerSample(
        cpu_cores_mean=cores, target_cpus=[0], core_busy_mean={"0": cores + 0.3, "1": 0.7},
        roles_cores_mean={"k6": 0.66, "postgres": 0.1, "redis": 0.2}, role_cpus={"k6": [1]},
        throttling={"periods": 300.0, "throttled": 300.0 * throttled, "throttled_s": 0.4},
    )  # fmt: skip


def local_cache_target(rate: float, _step: int) -> tuple[LoadFigures, ServerSample]:
    """The cached rung at 300m as issue 49 found it: every rate up to 4,000 passes; at 8,000 k6 drops
    arrivals at two thirds of its core while the target uses 0.22-0.25 of its 0.30, throttled in 92 % of
    its periods."""
    if rate <= 4000:
        return load(rate, rate, 12.0), budgeted(0.2 * rate / 4000, 0.3)
    return load(rate, 4200, 140.0, dropped=74, util=0.66), budgeted(0.235, 0.92)


SIX_STEPS = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=36)


def test_a_search_that_runs_out_of_steps_says_where_it_stopped_and_does_not_converge() -> None:
    result = search(SIX_STEPS, local_cache_target)
    assert [step.rate for step in result.steps] == [500, 1000, 2000, 4000, 8000, 8000]
    assert result.capacity == 4000
    assert not result.converged
    assert result.unconverged == (
        "ran out of its 6 steps: last pass 4,000 req/s, lowest failure 8,000 (100% apart, for a precision of 10%)"
    )


def test_a_target_that_passes_every_rate_up_to_the_most_offered_has_no_converged_capacity() -> None:
    plan = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=60, max_rate=2000)
    result = search(plan, lambda rate, _n: (load(rate, rate, 5.0), ServerSample()))
    assert result.capacity == 2000
    assert not result.converged
    assert "every rate passed, up to 2,000 req/s, the most it offers (max_rate)" in result.unconverged


def rung(label: str, index: int = 0) -> Rung:
    config = RungConfig(cpus="0", capacity=True, slo_p99_ms=100, cpu_budget="300m")
    return Rung(index=index, label=label, config=config, changes=(), allow_multi=False, line=None)


def searched(label: str, capacity: CapacityResult, index: int = 0) -> RungResult:
    best = capacity.best
    assert best is not None
    return rung_result(rung(label, index), best.figures, best.server, None, capacity, {}, {}, 40.0)


def test_an_unconverged_search_is_reported_as_at_least_its_last_pass_and_never_as_target_bound() -> None:
    result = searched("local cache on", search(SIX_STEPS, local_cache_target))
    assert not result.verdict.server_figure
    assert result.bottleneck is not None
    assert result.bottleneck.kind == UNCONVERGED
    assert result.verdict.ceiling == "search did not converge"
    assert "target" not in result.verdict.ceiling
    assert headline(result) == (
        "≥ 4,000 req/s (search did not converge: ran out of its 6 steps: last pass 4,000 req/s, lowest failure "
        "8,000 (100% apart, for a precision of 10%))"
    )
    text = markdown(with_judgements(Results(ladder="l", created="now", claims=[], rungs=[result])))
    assert "| ≥ 4,000 | search did not converge |" in text
    assert "search did not converge: ran out of its 6 steps" in text
    assert "at 8,000 req/s the step failed on: p99 140.0 ms > 100 ms; 74 iterations dropped" in text
    assert "limited by the target" not in text
    assert "target on CPU" not in text


def converged(label: str, capacity: float, index: int) -> RungResult:
    """A rung whose search bracketed `capacity` and whose target set the ceiling, five repeats alike."""

    def target(rate: float, _step: int) -> tuple[LoadFigures, ServerSample]:
        if rate <= capacity:
            return load(rate, rate, 12.0), budgeted(0.29 * rate / capacity, 0.6)
        return load(rate, capacity, 400.0), budgeted(0.3, 0.95)

    plan = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=120)
    one = searched(label, search(plan, target), index)
    assert one.verdict.server_figure
    assert one.bottleneck is not None
    assert one.bottleneck.kind == TARGET
    return summarise_rung([one.model_copy(update={"repeat": k + 1}) for k in range(5)])


def test_every_comparison_with_an_unconverged_search_is_inconclusive() -> None:
    off = converged("local cache off", 3000, 0)
    unconverged = searched("local cache on", search(SIX_STEPS, local_cache_target), 1)
    on = summarise_rung([unconverged.model_copy(update={"repeat": k + 1}) for k in range(5)])
    claim = Claim(
        text="the cache is worth 1.3x", source="-", from_rung="local cache off", to_rung="local cache on",
        metric="capacity", claimed_ratio=1.3,
    )  # fmt: skip
    results = with_judgements(Results(ladder="l", created="now", claims=[claim], rungs=[off, on]))
    reason = "local cache on search did not converge in 5 of 5 repeats: ran out of its 6 steps"
    step, claimed = results.comparisons
    for judgement in (step, claimed):
        assert judgement.comparison.label == "inconclusive"
        assert judgement.comparison.reason.startswith(reason), judgement.comparison.reason
        assert judgement.comparison.ratio is None, "no effect is printed for a figure that is not a capacity"
    assert claimed.verdict == claimed.comparison.shown
    text = markdown(results)
    assert f"capacity: inconclusive ({reason}" in text
    # Across two runs too: `tenk lab compare` and its gate see no capacity in it.
    assert compare_rungs(off, on, "capacity").label == "inconclusive"
    [row] = [row for row in compare_rows(results, results) if row["rung"] == "local cache on"]
    assert row["B vs A"].startswith(f"inconclusive ({reason}")
    assert row["A step"].startswith(f"inconclusive ({reason}")
    halved = results.model_copy(update={"rungs": [off, on.model_copy(update={"value": 2000.0})]})
    assert not [line for line in regressions(results, halved, 0.05) if "capacity" in line]


def test_dropped_arrivals_are_the_generators_whatever_the_throttling_unless_the_target_was_saturated() -> None:
    figures, server = local_cache_target(8000, 1)
    # Throttled in 92 % of its periods, yet at 78 % of its budget: not saturated, so k6's drops are k6's.
    bottleneck = attribute(figures, server, 0.3)
    assert bottleneck.kind == GENERATOR
    assert bottleneck.name == "k6"
    assert "k6 dropped 74 arrivals" in bottleneck.detail
    assert "throttled in 92% of its quota periods" in bottleneck.detail
    # Saturated, beside a generator with headroom: the target's.
    assert attribute(figures, budgeted(0.29, 0.92), 0.3).kind == TARGET
    # Saturated, but the generator at its limit: still the generator's.
    busy = figures.model_copy(update={"generator_util": 0.85})
    assert attribute(busy, budgeted(0.29, 0.92), 0.3).kind == GENERATOR
    # Another party's saturated core is still named: the drops were the answers' lateness behind it.
    postgres = server.model_copy(
        update={"core_busy_mean": {"0": 0.5, "1": 0.99}, "roles_cores_mean": {"postgres": 0.9, "k6": 0.05}}
    )
    assert attribute(figures.model_copy(update={"generator_util": 0.05}), postgres, 0.3).name == "postgres"
    # Without drops, a budget spent in most of its periods is the target's own ceiling, as before.
    clean = figures.model_copy(update={"dropped": 0})
    assert attribute(clean, server, 0.3).kind == TARGET


def test_the_search_starts_from_the_calibrations_estimate_and_converges_within_six_steps() -> None:
    offered: list[float] = []

    def measure(rate: float, step: int) -> tuple[LoadFigures, ServerSample]:
        offered.append(rate)
        return local_cache_target(rate * 4000 / 4400, step) if rate <= 4400 else local_cache_target(8000, step)

    plan = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=36, estimate=4000, target_cores=0.3)
    result = search(plan, measure)
    assert offered[0] == 4000 * START_SHARE
    assert result.converged, (offered, result.unconverged)
    assert 4000 <= result.capacity <= 4400
    assert len(offered) <= plan.max_steps
    assert "70% of the calibration's estimate, 4,000" in result.plan


def test_a_passing_steps_cpu_steers_how_far_the_search_grows() -> None:
    plan = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=36, target_cores=0.3)
    assert grow(plan, 1000, budgeted(0.06, 0.1)) == 2000  # a fifth of its budget: doubling is safe
    assert grow(plan, 1000, budgeted(0.2, 0.3)) == 1500  # two thirds: where the budget should run out
    assert grow(plan, 1000, budgeted(0.29, 0.6)) == 1100  # at its limit: creep by the precision
    assert grow(plan, 1000, ServerSample()) == 2000  # not sampled: double
    assert grow(SearchPlan(slo_p99_ms=100, start_rate=1, step_s=3, budget_s=36), 10, ServerSample()) == 20


def test_a_rung_expected_to_be_target_bound_that_is_not_says_so() -> None:
    expected = replace(rung("local cache on"), expect_bound="target")
    capacity = search(SIX_STEPS, local_cache_target)
    best = capacity.best
    assert best is not None
    result = rung_result(expected, best.figures, best.server, None, capacity, {}, {}, 40.0)
    assert 'expected to be target-bound (expect_bound = "target"), but: search did not converge' in result.verdict.notes
    unexpected = rung_result(rung("local cache on"), best.figures, best.server, None, capacity, {}, {}, 40.0)
    assert not [note for note in unexpected.verdict.notes if note.startswith("expected")]


def known_target(capacity: float, fixed_cores: float = 0.0) -> tuple[list[float], Measure]:
    """A target under a 300m budget whose capacity is `capacity`: within it every rate passes, the CPU it
    uses `fixed_cores` (work that does not grow with the rate, or a neighbour's) plus its share of the rest;
    past it, it serves its capacity at a p99 over the SLO (more than half of what was offered, so each
    failure is measured twice)."""
    offered: list[float] = []

    def measure(rate: float, _step: int) -> tuple[LoadFigures, ServerSample]:
        offered.append(rate)
        if rate <= capacity:
            return load(rate, rate, 12.0), budgeted(fixed_cores + (0.3 - fixed_cores) * rate / capacity, 0.3)
        return load(rate, capacity, 400.0), budgeted(0.3, 0.95)

    return offered, measure


@pytest.mark.parametrize("estimate_share", [0.5, 0.8, 1.0, 1.5, 1.99])
@pytest.mark.parametrize("steered", [False, True])
def test_a_search_sized_from_the_estimate_brackets_the_capacity_to_its_precision(
    estimate_share: float, steered: bool
) -> None:
    """The calibration's estimate is the capacity x 1 / `estimate_share`: from a capacity twice it
    (`ESTIMATE_SPAN`) to one below it. A budget of the steps the plan says a bracket search needs
    brackets it, growing by `GROWTH` (no CPU to steer by) or as the CPU steers."""
    capacity = 4000.0
    estimate = capacity / estimate_share
    sizing = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=10, estimate=estimate)
    budget = sizing.steps_needed * (sizing.step_s + STEP_OVERHEAD_S)
    plan = replace(sizing, budget_s=budget, target_cores=0.3 if steered else None)
    assert plan.max_steps == plan.steps_needed
    offered, measure = known_target(capacity)
    result = search(plan, measure)
    assert result.converged, (offered, result.unconverged)
    assert capacity / (1 + plan.precision) <= result.capacity <= capacity, offered
    assert "short of" not in result.plan


def test_the_steps_a_bracket_search_needs_follow_its_span_growth_and_precision() -> None:
    # From 500 to 50,000: 7 doublings to a failure, 4 bisections of a 2x bracket to 10 %, and the first
    # failure and every bisection measured again (the worst case: each bisection's first measurement fails).
    assert bracket_steps(500, 50_000, 0.10, confirm_failures=True) == 1 + 7 + 4 + 5
    assert bracket_steps(500, 50_000, 0.10, confirm_failures=False) == 1 + 7 + 4
    assert bracket_steps(500, 50_000, 0.05, confirm_failures=False) == 1 + 7 + 5  # twice as precise: one more
    assert bracket_steps(500, 400, 0.10, confirm_failures=False) == 1 + 0 + 4  # the first rate is above it
    plan = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=36, estimate=4000)
    assert plan.steps_needed == bracket_steps(plan.first_rate, 4000 * ESTIMATE_SPAN, 0.10, True) == 12
    assert SIX_STEPS.steps_needed == 17  # no estimate: from start_rate up to max_rate
    assert "at most 6 steps of 3s (short of the 17 a bracket search may need from there)" in SIX_STEPS.describe()


def test_a_cpu_projection_that_keeps_falling_short_costs_a_few_steps_not_one_per_precision() -> None:
    """Most of the budget taken by work that does not grow with the rate (here 0.24 of 0.30 at any rate):
    each pass projects the limit barely above itself. Creeping by the precision a step, brief runs of the
    shipped ladders ran out of steps with every rate passed (issue 49); a capacity of 6,000 is found within
    the steps the plan sizes."""
    offered, measure = known_target(6000, fixed_cores=0.24)
    plan = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=66, estimate=1000, target_cores=0.3)
    assert plan.max_steps == plan.steps_needed == 12
    result = search(plan, measure)
    assert result.converged, (offered, result.unconverged)
    assert 6000 / 1.1 <= result.capacity <= 6000, offered


def test_a_full_core_note_tells_the_labs_dependencies_from_another_jobs_processes() -> None:
    """A brief local-cache run on this shared machine: CPU 0 full at the lightest step, the stack's
    Postgres and Redis on it at 0.02 cores, 0.86 held by processes the lab did not start. The note called
    all 0.86 "its dependencies"."""
    server = ServerSample(
        cpu_cores_mean=0.13, target_cpus=[0], core_busy_mean={"0": 0.99, "1": 0.99}, neighbour_cores_mean=0.86,
        roles_cores_mean={"postgres": 0.01, "redis": 0.01, "k6": 0.19},
        role_cpus={"postgres": [0], "redis": [0], "k6": [1]},
        throttling={"periods": 200.0, "throttled": 6.0, "throttled_s": 0.01},
    )  # fmt: skip
    ours, others = outside_cores(server)
    assert round(ours, 2) == 0.02
    assert round(others, 2) == 0.84
    # A role pinned to both cores counts for its share of the target's.
    spread = server.model_copy(update={"role_cpus": {"postgres": [0, 1], "redis": [0, 1], "k6": [1]}})
    assert round(outside_cores(spread)[0], 3) == 0.01
    capacity = search(SIX_STEPS, lambda rate, _n: (load(rate, rate, 5.0), server))
    best = capacity.best
    assert best is not None
    budget = BudgetRecord(asked="300m", millicores=300)
    result = rung_result(rung("local cache on"), best.figures, best.server, None, capacity, {}, {}, 40.0, budget=budget)
    assert not [note for note in result.verdict.notes if "its dependencies 0.86" in note]
    assert [note for note in result.verdict.notes if "its dependencies 0.02 cores, other processes 0.84" in note]


def stalled_once_overloaded(capacity: float) -> tuple[list[float], Measure]:
    """A target under a 300m budget whose p99 passes up to `capacity` and breaks past it while it still
    serves what it is offered (so what a failing step served says nothing of where the capacity lies and
    the search bisects), on a busy machine: once a rate has overloaded it, the first measurement of every
    rate fails on a stall, serving all it was offered, so it is measured again, and the second measures
    the target as it is."""
    offered: list[float] = []

    def measure(rate: float, _step: int) -> tuple[LoadFigures, ServerSample]:
        first = rate not in offered
        offered.append(rate)
        server = budgeted(0.3 * min(rate, capacity) / capacity, 0.3 if rate <= capacity else 0.95)
        stalled = first and any(earlier > capacity for earlier in offered[:-1])
        return load(rate, rate, 12.0 if rate <= capacity and not stalled else 400.0), server

    return offered, measure


@pytest.mark.parametrize("estimate_share", [0.5, 0.7, 0.8, 0.9, 1.0, 1.5, 1.99])
@pytest.mark.parametrize("steered", [False, True])
def test_a_search_whose_every_bisection_fails_at_first_still_brackets_the_capacity_within_the_steps_it_needs(
    estimate_share: float, steered: bool
) -> None:
    """Every bisection's first measurement fails and is measured again, as on a loaded machine of two
    cores (the brief runs of issue 49 that ended one bisection short): a budget of `steps_needed` still
    brackets the capacity to its precision, and says how near it came."""
    capacity = 4000.0
    sizing = SearchPlan(slo_p99_ms=100, start_rate=500, step_s=3, budget_s=10, estimate=capacity / estimate_share)
    plan = replace(
        sizing,
        budget_s=sizing.steps_needed * (sizing.step_s + STEP_OVERHEAD_S),
        target_cores=0.3 if steered else None,
    )
    assert plan.max_steps == plan.steps_needed
    offered, measure = stalled_once_overloaded(capacity)
    result = search(plan, measure)
    assert result.converged, (offered, result.unconverged)
    assert capacity / (1 + plan.precision) <= result.capacity <= capacity, offered
    first_failure = next(step.rate for step in result.steps if not step.passed)
    after = offered[offered.index(first_failure) :]
    assert all(after.count(rate) == 2 for rate in after), offered  # each bisection's stall cost its step
    confirmed = [step for step in result.steps if not step.passed and "unconfirmed: measured again" not in step.reasons]
    failed = min(step.rate for step in confirmed)
    assert result.reached == (
        f"last pass {result.capacity:,.0f} req/s, lowest failure {failed:,.0f} "
        f"({failed / result.capacity - 1:.0%} apart, for a precision of 10%)"
    )
    text = markdown(with_judgements(Results(ladder="l", created="now", claims=[], rungs=[searched("busy", result)])))
    assert f"; bracketed: {result.reached}" in text, "the report says the precision reached"
    assert f"- **search**: {result.reached}" in text, "and so do the rung's details"
