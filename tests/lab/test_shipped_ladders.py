"""Every ladder tenk ships (src/tenk/lab/presets/ and examples/) stays valid as the code and the machine
change: its CPU budget is `auto` or says why it is fixed, and run briefly (`make test-lab`), every rung
completes, every capacity search converges, and every rung the ladder expects to be target-bound is.
`make test-lab` runs all of them; CI's (.ci/run), those bounded within `CI_LADDER_BOUND_S`.

Briefly: one repeat; a capacity rung keeps the number of search steps it ships with (enough for a bracket
search, `test_every_shipped_search_has_the_steps_a_bracket_search_needs`), each 2 s instead of its own;
a fixed-rate or wrk rung runs at 10 req/s for a second (wrk with a handful of connections). The
calibration (`auto`) runs as shipped: the budget it chooses is what a ladder goes stale against.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import shutil
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from harness.clients import TEST_API_KEY
from harness.stack import Stack, fresh_database
from tenk.lab.cli import PRESET_DIR
from tenk.lab.definition.ladder import Ladder, RungConfig, load_ladder
from tenk.lab.documents import GENERATOR, NEIGHBOURS, load_results
from tenk.lab.measuring.auto_budget import PROBE_S
from tenk.lab.measuring.bottleneck import outside_cores
from tenk.lab.measuring.capacity import STEP_OVERHEAD_S, SearchPlan
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.runner import time_bound_s
from tenk.lab.results.derivations import unconverged
from tenk.lab.results.record import run_ladder

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO / "src" / "tenk" / "lab" / "examples"
SHIPPED = sorted([*PRESET_DIR.glob("*.toml"), *EXAMPLE_DIR.glob("*.toml")])
BRIEF_STEP_S = 2.0
# A brief wrk rung's run: long enough for a cold budgeted worker's first answers (`brief`).
BRIEF_WRK_S = 5
# A brief run whose stated bound (`bound_s`) is longer is marked `ladders`, which CI's `make test-lab` leaves out:
# CI's 90 minutes (.ci/run) hold the suite three times over (newest, lowest, stock), the lab's own runs and
# the cluster's, and ran out in the lab when it ran every shipped ladder (the landing of 2026-12-02).
CI_LADDER_BOUND_S = 150.0
# The brief runs CI runs, together: their share of CI's time.
CI_LADDERS_MIN = 10.0


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def capacity_plan(config: RungConfig, calibrated: bool = False) -> SearchPlan:
    """The rung's search as the config states it; `calibrated`, as it starts from an estimate of `auto`'s
    calibration (any figure: the steps a bracket search needs from one depend on its span, not on it)."""
    estimate = config.start_rate if calibrated else None
    plan = SearchPlan(config.slo_p99_ms, config.start_rate, config.step_s, config.capacity_budget_s, config.max_rate)
    return replace(plan, estimate=estimate)


@pytest.mark.parametrize("path", SHIPPED, ids=_id)
def test_every_shipped_search_has_the_steps_a_bracket_search_needs(path: Path) -> None:
    """Every capacity rung's budget fits the steps a bracket search needs (`SearchPlan.steps_needed`): from
    the calibration's estimate where `auto` sizes the rung, else from `start_rate` up to `max_rate`. The
    brief run keeps each search's steps, so it has them too."""
    ladder = load_ladder(path)
    for rung in ladder.rungs:
        config = rung.config
        if not config.capacity:
            continue
        calibrated = (config.cpu_budget or "auto") == "auto" and ladder.topology != "cluster"
        plan = capacity_plan(config, calibrated)
        assert plan.max_steps >= plan.steps_needed, (rung.label, plan.describe())


def brief(ladder: Ladder, searches: bool = True) -> Ladder:
    """The ladder as the check runs it: capacity rungs with their own number of steps, each short; every
    other rung at 10 req/s for a second, with a fast vendor; without wrk, k6. With `searches` false, the
    capacity rungs too run at 10 req/s for a second: the presets' smoke runs this check replaced.

    wrk is closed-loop and ignores the rate: its rungs get a handful of connections instead (the pooling
    study's 400 make per-request connections run out of Postgres slots: 503s, as in 003), a second's
    warm-up, even where the ladder warms up none (the ladder study's reason, a queue of blocked requests
    left behind, is four requests here), and `BRIEF_WRK_S` seconds. k6 counts what its graceful stop lets
    finish; wrk counts only what is answered before it stops, and a fresh worker's first requests (imports,
    its first queries) took 1.1 s under the ladder study's 250m, 1.7 s under the search preset's 150m and
    2.2 s from its warm-up's start under 100m, each on a busy machine: a one-second wrk rung completed none."""
    have_wrk = shutil.which("wrk") is not None

    def shorten(config: RungConfig) -> RungConfig:
        if config.capacity and searches:
            steps = capacity_plan(config).max_steps
            # The same number of steps: half a second of slack keeps float division from losing one.
            budget = steps * (BRIEF_STEP_S + STEP_OVERHEAD_S) + 0.5
            return replace(config, step_s=BRIEF_STEP_S, capacity_budget_s=budget, warmup_s=min(config.warmup_s, 1.0))
        engine = config.engine if have_wrk else "k6"
        return replace(
            config,
            capacity=False,
            rate=10,
            duration_s=BRIEF_WRK_S if engine == "wrk" else 1,
            warmup_s=1.0 if engine == "wrk" else 0,
            upstream={**config.upstream, "p50_ms": 5.0, "p99_ms": 20.0},
            engine=engine,
            connections=min(config.connections, 4) if engine == "wrk" else config.connections,
        )

    return replace(ladder, rungs=tuple(replace(rung, config=shorten(rung.config)) for rung in ladder.rungs))


@pytest.mark.parametrize("path", SHIPPED, ids=_id)
def test_every_shipped_ladder_budgets_auto_or_says_why_its_budget_is_fixed(path: Path) -> None:
    text = path.read_text()
    defaults = tomllib.loads(text)["defaults"]
    assert "cpu_budget" in defaults, "say the budget: the run's default depends on the machine"
    if defaults["cpu_budget"] == "auto":
        return
    lines = text[text.index("[defaults]") :].splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("cpu_budget ="))
    assert lines[at - 1].startswith("#"), f"{path.name}: a fixed budget ({defaults['cpu_budget']}) says why, above it"


@pytest.mark.parametrize("path", SHIPPED, ids=_id)
def test_every_shipped_ladder_with_a_capacity_search_states_what_should_bound_it(path: Path) -> None:
    if not any(rung.config.capacity for rung in load_ladder(path).rungs):
        return
    assert "expect_bound" in tomllib.loads(path.read_text())["defaults"], path.name


@pytest.mark.parametrize("path", SHIPPED, ids=_id)
def test_the_brief_run_keeps_each_searchs_steps_and_runs_once(path: Path) -> None:
    ladder = load_ladder(path)
    for shipped, short in zip(ladder.rungs, brief(ladder).rungs, strict=True):
        assert short.expect_bound == shipped.expect_bound
        if shipped.config.capacity:
            assert capacity_plan(short.config).max_steps == capacity_plan(shipped.config).max_steps
            assert short.config.step_s == BRIEF_STEP_S
        else:
            assert short.config.duration_s == (BRIEF_WRK_S if short.config.engine == "wrk" else 1)
            assert short.config.warmup_s == (1.0 if short.config.engine == "wrk" else 0)


def bound_s(ladder: Ladder) -> float:
    """A run's stated bound: each rung's (`time_bound_s`), and `auto`'s calibration of each rung it sizes
    (the rule's own figure, `plan_text`)."""
    ladder = with_budgets(ladder)
    calibrated = sum(1 for rung in ladder.rungs if rung.config.cpu_budget == "auto")
    return time_bound_s(ladder, repeats=1) + calibrated * (2 * PROBE_S + 14)


def in_ci(ladder: Ladder) -> bool:
    """Whether CI's `make test-lab` runs the ladder's brief run (the cluster's run in `make test-cluster`)."""
    return bound_s(brief(ladder)) <= CI_LADDER_BOUND_S


def test_the_brief_runs_ci_runs_fit_their_share_of_its_time() -> None:
    """Their stated bounds, together, within `CI_LADDERS_MIN`; a bound is loose (a search that converges
    stops early, a target starts in less than its allowance). Every ladder is run by `make test-lab`,
    and CI runs at least one with a capacity search and one without."""
    ladders = [load_ladder(path) for path in SHIPPED if load_ladder(path).topology != "cluster"]
    ci = [ladder for ladder in ladders if in_ci(ladder)]
    assert sum(bound_s(brief(ladder)) for ladder in ci) / 60 <= CI_LADDERS_MIN, [ladder.name for ladder in ci]
    assert any(rung.config.capacity for ladder in ci for rung in ladder.rungs)
    assert any(not rung.config.capacity for ladder in ci for rung in ladder.rungs)


def with_budgets(ladder: Ladder) -> Ladder:
    """Every rung's budget as `tenk lab run` resolves it on a machine of two cores (auto where unset)."""
    rungs = tuple(
        replace(rung, config=replace(rung.config, cpu_budget=rung.config.cpu_budget or "auto")) for rung in ladder.rungs
    )
    return replace(ladder, rungs=rungs)


# A run's deadline: its stated bound twice over, and the stack's start and seed. On this 2-core machine,
# shared with other work, auto's calibration took about 35 s a rung against its rule's 22, and the stack
# about 50 s before the first probe (the slow-upstream preset, 2026-12-01).
BUSY_FACTOR = 2.0
STACK_START_S = 180.0


def _runs(path: Path) -> object:
    ladder = load_ladder(path)
    marks = [pytest.mark.timeout(BUSY_FACTOR * bound_s(brief(ladder)) + STACK_START_S)]
    if not in_ci(ladder):
        marks.append(pytest.mark.ladders)
    if ladder.topology == "cluster":
        marks.append(pytest.mark.cluster)
    if any(rung.config.target.startswith("tests.lab.datasette_app") for rung in ladder.rungs):
        marks.append(
            pytest.mark.skipif(importlib.util.find_spec("datasette") is None, reason="uv pip install datasette")
        )
    return pytest.param(path, marks=marks, id=_id(path))


@pytest.fixture(scope="module")
def lab_database_url(stack: Stack) -> str:
    """An empty database on the suite's Postgres, which the lab seeds as it seeds any empty database it is
    given: with the lab's own counts, the rows the shipped mixes read (the suite's database holds fewer, so a
    mix over ids the lab's data has would read 404s)."""
    return asyncio.run(fresh_database(stack, "tenk_shipped_ladders"))


@pytest.mark.slow
@pytest.mark.parametrize("path", [_runs(path) for path in SHIPPED])
def test_a_shipped_ladder_run_briefly_converges_where_it_expects_and_its_report_renders(
    path: Path, stack: Stack, lab_database_url: str, tmp_path: Path
) -> None:
    ladder = brief(load_ladder(path))
    env = stack.env(TENK_DATABASE_URL=lab_database_url, TENK_LAB_API_KEY=TEST_API_KEY, PYTHONPATH=str(REPO))
    out = run_ladder(ladder, RunOptions(results_root=tmp_path, base_env=env, repeats=1))
    results = json.loads((out / "results.json").read_text())
    document = load_results(out)
    assert json.loads(document.model_dump_json()) == results, "every map the runner wrote reads back"
    assert [rung.label for rung in document.rungs] == [rung.label for rung in ladder.rungs]
    stale: list[str] = []
    busy: list[str] = []
    for rung, result in zip(ladder.rungs, document.rungs, strict=True):
        figures = result.figures
        assert figures.requests > 0, rung.label
        if rung.config.capacity:
            assert result.capacity is not None
            if unconverged(result):
                stale.append(f"{rung.label}: {unconverged(result)}")
                continue
            # A step of two seconds can leave k6 itself short of CPU on a machine of two cores: that says
            # nothing of the target's bound, either way. Any other limit (a dependency, the neighbours, a
            # search left unconverged) is the ladder gone stale, and fails.
            generator_bound = result.bottleneck is not None and result.bottleneck.kind == GENERATOR
            if rung.expect_bound == "target" and not generator_bound and not result.verdict.server_figure:
                # Neighbours that are mostly not the lab's (another job on a shared machine, not the stack's
                # Postgres or Redis) say nothing of the ladder: the machine was busy, and the run says so.
                ours, others = outside_cores(result.server)
                if result.bottleneck is not None and result.bottleneck.kind == NEIGHBOURS and others > ours:
                    busy.append(f"{rung.label}: other processes held {others:.2f} of the target's cores")
                    continue
                stale.append(f"{rung.label}: {result.verdict.ceiling}; {result.verdict.notes}")
        elif rung.config.target != "baseline:naive_blocking":
            # Blocking calls in `async def` hold the event loop: even 10 req/s can time requests out. That
            # failure is what such a rung exists to show; every other target must answer a light load cleanly.
            assert figures.error_rate == 0, (rung.label, figures.endpoints)
    if ladder.name == "ingest":
        # Every rung, the direct-INSERT baseline too, records what landed, beside what was accepted.
        for result in document.rungs:
            assert result.server.ingest.get("rows_landed", 0) > 0, result.label
    if ladder.name == "slow-upstream":
        parked = document.rungs[-1].server
        assert (parked.upstream.get("max_in_flight") or 0) >= 1
        assert any(key.startswith("tenk_upstream_inflight") for key in parked.gauges), "tenk's own gauge"
    report = (out / "report.md").read_text()
    for rung in ladder.rungs:
        assert rung.label in report
    for claim in ladder.claims:
        assert ("qualitative" if claim.claimed_ratio is None else f"{claim.claimed_ratio:.2f}x") in report
        assert claim.source in report
        if claim.expect:
            assert re.search(r"(held|not held|not measured): from_rung", report), "the expectation is checked"
    html = (out / "report.html").read_text()
    assert ladder.rungs[0].label in html
    assert "<table" in html
    # Everything above holds, or the test fails. A search that runs out of its steps, or a rung not
    # target-bound where the ladder expects it, is the ladder gone stale: each is reported as a known
    # failure naming what failed, until the ladder is fixed (issue 49, item 3). A rung crowded by another
    # job's processes is reported apart: the machine was busy, which a ladder cannot fix.
    if stale:
        pytest.xfail("stale: " + " | ".join(stale))
    if busy:
        pytest.xfail("busy machine, not the ladder: " + " | ".join(busy))
