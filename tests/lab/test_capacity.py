"""Capacity search against a target whose limit is known: 4 slots held 100 ms each = 40 req/s.

Sleeps this long make the limit the semaphore's, not the machine's: a busy neighbour delays a
wake-up by milliseconds, far inside the 400 ms SLO. The target may use every CPU here, for the same reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from tenk.lab.definition.ladder import load_ladder
from tenk.lab.documents import LoadFigures, ServerSample
from tenk.lab.driving import latency
from tenk.lab.measuring.capacity import Measure, SearchPlan, next_rate, search
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.progress import QuietProgress
from tenk.lab.results.record import run_ladder

REPO = Path(__file__).resolve().parents[2]


def mix_file(tmp_path: Path) -> Path:
    path = tmp_path / "work.toml"
    path.write_text('name = "work"\n[[endpoint]]\nname = "work"\npath = "/work"\nweight = 1\n')
    return path


ALL_CPUS = ",".join(str(cpu) for cpu in sorted(os.sched_getaffinity(0)))


def lab_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def children_named(fragment: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if any(fragment in part for part in proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
def test_capacity_search_finds_the_known_limit(tmp_path: Path) -> None:
    mix_file(tmp_path)
    ladder_path = tmp_path / "capacity.toml"
    ladder_path.write_text(
        """
name = "semaphore"
repeats = 1
[defaults]
target = "tests.lab.semaphore_app:app"
server = "uvicorn"
cpus = "CPUS"
mix = "work.toml"
capacity = true
slo_p99_ms = 400
start_rate = 10
step_s = 3
capacity_budget_s = 45
warmup_s = 1
[defaults.env]
SEM_PERMITS = "4"
SEM_SLEEP_MS = "100"
[[rung]]
label = "four slots"
""".replace("CPUS", ALL_CPUS)
    )
    out = run_ladder(load_ladder(ladder_path), RunOptions(results_root=tmp_path / "results", base_env=lab_env()))
    rung = json.loads((out / "rung-01.json").read_text())
    search = rung["capacity"]
    assert 25 <= search["capacity"] <= 42, search
    assert any(not step["passed"] and step["rate"] >= 40 for step in search["steps"])  # at or past the limit
    assert any(reason.startswith("p99") for reason in search["limited_by"]), search["limited_by"]
    assert not search["generator_limited"]
    # Ramp first, then bisection: the rates double until the first failure.
    rates = [step["rate"] for step in search["steps"]]
    assert rates[:3] == [10, 20, 40]
    budget = SearchPlan(slo_p99_ms=400, start_rate=10, step_s=3, budget_s=45)
    assert len(rates) <= budget.max_steps
    assert f"at most {budget.max_steps} steps" in search["plan"]  # the bound is stated before the first step
    assert rung["server"]["cpu_cores_mean"] >= 0
    assert rung["server"]["rss_mb_max"] > 10
    assert children_named("semaphore_app") == []


@pytest.mark.slow
def test_fixed_rate_ladder_writes_every_output_and_stops_its_processes(tmp_path: Path) -> None:
    mix_file(tmp_path)
    ladder_path = tmp_path / "slots.toml"
    ladder_path.write_text(
        """
name = "slots"
repeats = 2
description = "one slot, then four"
[defaults]
target = "tests.lab.semaphore_app:app"
server = "uvicorn"
cpus = "CPUS"
mix = "work.toml"
rate = 30
duration_s = 3
warmup_s = 0
slo_p99_ms = 400
[defaults.env]
SEM_PERMITS = "1"
SEM_SLEEP_MS = "50"
[[rung]]
label = "one slot"
[[rung]]
label = "four slots"
[rung.env]
SEM_PERMITS = "4"
[[claim]]
text = "four slots cut the tail 10x"
source = "test"
from_rung = "one slot"
to_rung = "four slots"
metric = "p99_ms"
claimed_ratio = 10
""".replace("CPUS", ALL_CPUS)
    )
    progress = QuietProgress()
    out = run_ladder(
        load_ladder(ladder_path),
        RunOptions(results_root=tmp_path / "results", base_env=lab_env(), progress=progress),
    )
    assert out.name.startswith("slots-")
    # Repeats are interleaved: every rung once, then every rung again.
    order = [note for note in progress.notes if note.startswith("rung ")]
    assert order == ["rung 1/2: one slot [1/2]", "rung 2/2: four slots [1/2]",
                     "rung 1/2: one slot [2/2]", "rung 2/2: four slots [2/2]"]  # fmt: skip
    for name in ("rung-01.json", "rung-02.json", "results.json", "report.md", "report.html"):
        assert (out / name).exists(), name
    results = json.loads((out / "results.json").read_text())
    one, four = results["rungs"]
    # 30 req/s offered to a 20 req/s target queues without bound; four slots (80 req/s) keep up.
    assert one["figures"]["p99_ms"] > 3 * four["figures"]["p99_ms"]
    assert four["verdict"]["slo_met"]
    assert four["changes"] == ["env.SEM_PERMITS: 1 -> 4"]
    assert len(four["repeats"]) == 2
    assert four["estimate"]["low"] <= four["value"] <= four["estimate"]["high"]
    assert four["verdict"]["ceiling"] == "no ceiling reached"  # it kept up: no bottleneck to name
    assert one["verdict"]["ceiling"] != "no ceiling reached"
    report = (out / "report.md").read_text()
    assert "env.SEM_PERMITS: 1 -> 4" in report
    assert "four slots cut the tail 10x" in report
    assert "k6" in (out / "rung-01" / "repeat-1" / "generator.log").read_text()
    # Every request's latency is kept as a histogram, beside the run and in the result.
    stored = (out / "rung-02" / "repeat-1" / "run-01" / "latency.hdr").read_text().strip()
    # Compared with that repeat's own figures: the rung's headline is its median repeat, either one.
    [first] = [repeat["figures"] for repeat in four["repeats"] if repeat["repeat"] == 1]
    assert stored == first["latency_hdr"]
    assert four["figures"]["latency_hdr"] in [repeat["figures"]["latency_hdr"] for repeat in four["repeats"]]
    histogram = latency.decode(stored)
    assert histogram.get_total_count() == first["requests"]
    assert latency.percentile_ms(histogram, 99) == pytest.approx(first["p99_ms"], rel=0.25)
    # The live view's per-second figures are kept too: they add up to the run.
    seconds = first["seconds"]
    assert len(seconds) >= 2
    assert sum(s["goodput_rps"] + s["errors"] for s in seconds) == first["requests"]
    assert children_named("semaphore_app") == []


@pytest.mark.slow
def test_fast_503s_are_errors_by_reason_and_not_throughput(tmp_path: Path) -> None:
    mix_file(tmp_path)
    ladder_path = tmp_path / "status.toml"
    ladder_path.write_text(
        """
name = "status"
repeats = 1
[defaults]
target = "tests.lab.status_app:app"
server = "uvicorn"
cpus = "CPUS"
mix = "work.toml"
rate = 20
duration_s = 3
warmup_s = 0
[[rung]]
label = "half 503"
""".replace("CPUS", ALL_CPUS)
    )
    out = run_ladder(load_ladder(ladder_path), RunOptions(results_root=tmp_path / "results", base_env=lab_env()))
    figures = json.loads((out / "results.json").read_text())["rungs"][0]["figures"]
    assert figures["errors"] > 0
    assert figures["errors_by_reason"] == {"status_503": figures["errors"]}
    assert figures["rps"] == pytest.approx((figures["requests"] - figures["errors"]) / 3, abs=0.01)
    assert "status_503" in (out / "report.md").read_text()


@pytest.mark.parametrize("checked", [True, False], ids=["body-checked", "status-only"])
def test_a_200_with_the_wrong_body_is_an_error_when_the_mix_checks_bodies(tmp_path: Path, checked: bool) -> None:
    check = 'check_json = { id = "{item}" }\n' if checked else ""
    (tmp_path / "items.toml").write_text(
        f'name = "items"\n[vars.item]\nrange = [1, 100]\n[[endpoint]]\nname = "item"\npath = "/items/{{item}}"\n'
        f"weight = 1\n{check}"
    )
    ladder_path = tmp_path / "bodies.toml"
    ladder_path.write_text(
        'name = "bodies"\nrepeats = 1\n[defaults]\ntarget = "tests.lab.wrong_body_app:app"\nserver = "uvicorn"\n'
        f'cpus = "{ALL_CPUS}"\nmix = "items.toml"\nrate = 50\nduration_s = 4\nwarmup_s = 0\n[[rung]]\nlabel = "a"\n'
    )
    out = run_ladder(load_ladder(ladder_path), RunOptions(results_root=tmp_path / "results", base_env=lab_env()))
    figures = json.loads((out / "results.json").read_text())["rungs"][0]["figures"]
    if not checked:
        assert figures["errors"] == 0
        return
    # One id in ten answers with the wrong body: about a tenth of 200 requests, far from none and from all.
    assert figures["errors_by_reason"] == {"wrong_body": figures["errors"]}
    assert 0.02 < figures["error_rate"] < 0.25, figures
    assert figures["rps"] == pytest.approx((figures["requests"] - figures["errors"]) / 4, abs=0.01)


def modelled_target(limit: float, overloaded_share: float = 1.0) -> tuple[list[float], Measure]:
    """A target that serves `limit` req/s within the SLO and, past it, `overloaded_share` of `limit` with
    p99 in seconds; the rates offered are recorded."""
    offered: list[float] = []

    def measure(rate: float, _step: int) -> tuple[LoadFigures, ServerSample]:
        offered.append(rate)
        served = rate if rate <= limit else limit * overloaded_share
        figures = LoadFigures(
            engine="k6", offered_rps=rate, duration_s=4, requests=round(served * 4), rps=served,
            p50_ms=5, p95_ms=8, p99_ms=10 if rate <= limit else 4000, max_ms=20 if rate <= limit else 5000,
            errors=0, error_rate=0.0, dropped=0, generator_cpu_s=0.1, generator_cores_used=0.1,
            generator_util=0.1, generator_cores=1, generator_bound=False,
        )  # fmt: skip
        return figures, ServerSample()

    return offered, measure


def test_a_target_far_below_the_first_rate_is_found_from_what_it_served() -> None:
    """11 req/s from a start at 200: halving alone (each failure measured twice) spent nine steps and
    never passed. What the overloaded step served says where to look."""
    offered, measure = modelled_target(11.5)
    result = search(SearchPlan(slo_p99_ms=100, start_rate=200, step_s=4, budget_s=60), measure)
    assert result.capacity == 11, offered
    assert result.converged
    assert offered[:2] == [200, 10]  # an overwhelming failure is not measured twice
    assert len(offered) <= 7, offered


def test_a_near_miss_is_still_measured_twice_and_bisected() -> None:
    offered, measure = modelled_target(300)
    result = search(SearchPlan(slo_p99_ms=100, start_rate=200, step_s=4, budget_s=60), measure)
    assert offered[:3] == [200, 400, 400]  # served 300 of 400: more than half, so measured again
    assert result.capacity == 300, offered
    assert len(offered) <= 6, offered
    assert result.converged


def test_the_next_rate_stays_near_what_the_lowest_failure_served() -> None:
    assert next_rate(0, 200, served_at_high=13.7, precision=0.1) == 12  # a little under it
    assert next_rate(0, 200, served_at_high=150, precision=0.1) == 100  # served more than half: halve
    assert next_rate(100, 400, served_at_high=300, precision=0.1) == 250  # the middle lies below it
    assert next_rate(10, 200, served_at_high=11.5, precision=0.1) == 13  # not the middle, 105
    assert next_rate(300, 400, served_at_high=300, precision=0.1) == 330
    assert next_rate(0, 2, served_at_high=0, precision=0.1) == 1
    assert next_rate(4, 100, served_at_high=4, precision=0.1) == 5  # 4.4 rounds to the pass itself
    # A pass 10 % above what the overloaded step served: that goodput was a collapse, not the limit.
    assert next_rate(12, 250, served_at_high=10.25, precision=0.1) == 55  # by ratio: the bounds are 20x apart
    assert next_rate(300, 400, served_at_high=200, precision=0.1) == 350


def test_a_target_that_collapses_when_overloaded_is_still_searched_above_a_small_pass() -> None:
    """Past its limit this target serves a third of it: goodput below the last pass says nothing of where
    the limit lies, and the search must not stop at that pass (4 req/s, 10 % above which rounds to 4)."""
    offered, measure = modelled_target(6, overloaded_share=1 / 3)
    result = search(SearchPlan(slo_p99_ms=100, start_rate=4, step_s=4, budget_s=120), measure)
    assert result.capacity == 6, offered
    assert result.converged


def test_a_target_whose_goodput_collapses_far_below_its_limit_is_found_within_the_budget() -> None:
    """Overloaded, the direct-INSERT app at 100m served 10 req/s of about 70 it could: the search crept up
    10 % a step from 9 and its steps ran out at 15."""
    offered, measure = modelled_target(70, overloaded_share=1 / 7)
    result = search(SearchPlan(slo_p99_ms=100, start_rate=500, step_s=4, budget_s=60), measure)
    assert 63 <= result.capacity <= 70, offered
    assert result.converged, offered
