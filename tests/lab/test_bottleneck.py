"""The lab names who set a ceiling: a target that burns its own CPU is its own bottleneck; a target
that waits on a Postgres burning its core is limited by Postgres, and its rate is no capacity.

Real k6, a real uvicorn target pinned to CPU 0, a real Postgres pinned to CPU 1; a few seconds a run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.stack import Stack
from tenk.lab.cpus import pin_tree
from tenk.lab.definition.ladder import load_ladder
from tenk.lab.documents import CapacityResult, EndpointFigures, LoadFigures, ProbeFigures, ServerSample, Step, Verdict
from tenk.lab.measuring.bottleneck import BUDGET_BOUND, NEIGHBOUR_SHARE, SATURATED, attribute
from tenk.lab.measuring.options import RunOptions
from tenk.lab.results.record import run_ladder
from tests.lab.test_capacity import REPO, lab_env, mix_file

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core for the target and one for the rest"),
]
TARGET_CPU, OTHER_CPU = sorted(os.sched_getaffinity(0))[:2]


def run_spin(tmp_path: Path, where: str, rate: int, env: dict[str, str], spin_ms: int = 25) -> dict[str, Any]:
    mix_file(tmp_path)
    path = tmp_path / "spin.toml"
    path.write_text(
        f"""
name = "spin-{where}"
repeats = 1
[defaults]
target = "tests.lab.spin_app:app"
server = "uvicorn"
cpus = "{TARGET_CPU}"
mix = "work.toml"
rate = {rate}
duration_s = 4
warmup_s = 0
slo_p99_ms = 200
[defaults.env]
SPIN_WHERE = "{where}"
SPIN_MS = "{spin_ms}"
[[rung]]
label = "spin"
"""
    )
    out = run_ladder(load_ladder(path), RunOptions(results_root=tmp_path / "results", base_env=env))
    rung: dict[str, Any] = json.loads((out / "results.json").read_text())["rungs"][0]
    return rung


def test_a_target_burning_its_own_cpu_is_named_as_the_bottleneck(tmp_path: Path) -> None:
    # 25 ms of CPU a request caps one core at 40 req/s; 80 req/s is twice that.
    rung = run_spin(tmp_path, "app", 80, lab_env())
    bottleneck = rung["bottleneck"]
    # On a busy machine other processes may take the target's core: then the honest answer is
    # "neighbours", and the rung is not a capacity. Never a dependency, never the generator.
    neighbours = rung["server"]["neighbour_cores_mean"]
    expected = "target" if neighbours <= NEIGHBOUR_SHARE else "neighbours"
    if bottleneck["kind"] == "undetermined" and not _saturated_by_its_own_figures(rung):
        # Twice the rate a core can serve, yet the sampler saw the target short of its cores and of its
        # budget: on CI hosts it read 76 % of its core (2026-11-29), for reasons the lab does not see. Then
        # "undetermined" is the honest answer: it must say what it saw, and name no dependency.
        assert "no core >= 90% busy" in bottleneck["detail"], bottleneck
        return
    assert bottleneck["kind"] == expected, (bottleneck, neighbours)
    if expected == "target":
        assert rung["verdict"]["ceiling"] == f"target on CPU {TARGET_CPU}"
    assert rung["cpu_ms"]["target"] > 10
    assert rung["projected_rps_per_core"] < 100


def _saturated_by_its_own_figures(rung: dict[str, Any]) -> bool:
    """Whether the rung's figures show the target out of CPU: its cores (or budget) >= 90 % busy, or its
    quota throttled in at least half of its periods."""
    server, budget = rung["server"], rung.get("cpu_budget") or {}
    cores = min(len(server["target_cpus"]) or 1, (budget.get("millicores") or 10**6) / 1000)
    throttling = server.get("throttling") or {}
    throttled = throttling.get("throttled", 0.0) / throttling["periods"] if throttling.get("periods") else 0.0
    return bool(server["cpu_cores_mean"] / cores >= SATURATED or throttled >= BUDGET_BOUND)


def test_a_target_waiting_on_a_saturated_postgres_is_limited_by_postgres(private_stack: Stack, tmp_path: Path) -> None:
    pid = private_stack.pg.pid()
    assert pid is not None
    pin_tree(pid, {OTHER_CPU})  # backends fork from the postmaster and inherit its CPU
    env = {**lab_env(), "TENK_DATABASE_URL": private_stack.pg.url}
    # About 40 ms of Postgres CPU a request: its one core serves 25 req/s; 80 req/s is three times that.
    rung = run_spin(tmp_path, "postgres", 80, env, spin_ms=40)
    bottleneck = rung["bottleneck"]
    postgres_core_busy = rung["server"]["core_busy_mean"][str(OTHER_CPU)]
    if bottleneck["kind"] == "undetermined" and postgres_core_busy < SATURATED:
        # Quiet, Postgres's core reads 99 % busy here; once in a CI run (2026-11-29) it read 87 %, with
        # Postgres at 0.83 cores. A core short of saturated names no ceiling: the lab must then say so,
        # and still point at Postgres as the busiest process, never at the target or the generator.
        assert bottleneck["name"] == "postgres", bottleneck
        assert "no core >= 90% busy" in bottleneck["detail"], bottleneck
        return
    assert bottleneck["kind"] == "dependency", (bottleneck, postgres_core_busy)
    assert bottleneck["name"] == "postgres", bottleneck
    assert rung["verdict"]["ceiling"] == f"postgres on CPU {OTHER_CPU}"
    assert not rung["verdict"]["server_figure"]
    assert rung["cpu_ms"]["postgres"] > rung["cpu_ms"]["target"]


def figures(util: float = 0.1, dropped: int = 0) -> LoadFigures:
    return LoadFigures(
        engine="k6", offered_rps=100, duration_s=5, requests=500, rps=100, p50_ms=5, p95_ms=50, p99_ms=500,
        max_ms=900, errors=0, error_rate=0, dropped=dropped, generator_cpu_s=0.5, generator_cores_used=util,
        generator_util=util, generator_cores=1, generator_bound=util > 0.8,
    )  # fmt: skip


def server(target: float, cores: dict[str, float], roles: dict[str, float], neighbours: float = 0.0) -> ServerSample:
    return ServerSample(
        cpu_cores_mean=target, neighbour_cores_mean=neighbours, target_cpus=[0], core_busy_mean=cores,
        roles_cores_mean=roles, role_cpus={role: [1] for role in roles},
    )  # fmt: skip


def budgeted(target: float, throttled: float, neighbours: float) -> ServerSample:
    """A step of a target held to 500m on CPU 0, throttled in `throttled` of 1,000 quota periods."""
    sample = server(target, {"0": target + neighbours, "1": 0.3}, {"postgres": 0.1}, neighbours=neighbours)
    return sample.model_copy(update={"throttling": {"periods": 1000.0, "throttled": 1000.0 * throttled}})


@pytest.mark.parametrize(
    ("fig", "sample", "phrase"),
    [
        (figures(), server(0.95, {"0": 0.97, "1": 0.3}, {"postgres": 0.2, "k6": 0.1}), "target on CPU 0"),
        (figures(util=0.9), server(0.5, {"0": 0.5, "1": 0.95}, {"k6": 0.9}), "k6"),
        (figures(), server(0.5, {"0": 0.5, "1": 0.98}, {"postgres": 0.6, "k6": 0.35}), "postgres on CPU 1"),
        (figures(), server(0.5, {"0": 0.5, "1": 0.98}, {"postgres": 0.3, "k6": 0.65}), "k6 on CPU 1"),
        (figures(), server(0.4, {"0": 1.0, "1": 0.3}, {"postgres": 0.1}, neighbours=0.6), "neighbours on CPU 0"),
        # A full core, nearly all of it the target's: its own CPU set the ceiling (a busy CI host, 2026-11-29).
        (figures(dropped=78), server(0.89, {"0": 0.96, "1": 0.3}, {"k6": 0.1}, neighbours=0.069), "target on CPU 0"),
        (figures(), server(0.80, {"0": 0.96, "1": 0.3}, {"k6": 0.1}, neighbours=0.16), "neighbours on CPU 0"),
        # Held to a 500m budget with its dependencies on its core, as the lab places them: throttled in most
        # quota periods, the target is bound by its budget, not by what shares the core (the headline run).
        (figures(), budgeted(0.42, throttled=0.82, neighbours=0.55), "target on CPU 0"),
        (figures(), budgeted(0.40, throttled=0.10, neighbours=0.55), "neighbours on CPU 0"),
        # Dropped arrivals with the target short of its cores: the generator's, whatever its CPU says.
        (figures(dropped=40), server(0.3, {"0": 0.3, "1": 0.4}, {"k6": 0.2}), "k6"),
        (figures(util=0.9, dropped=40), server(0.3, {"0": 0.3, "1": 0.9}, {"k6": 0.9}), "k6"),
        (figures(), server(0.3, {"0": 0.3, "1": 0.4}, {"k6": 0.2}), "undetermined"),
    ],
)
def test_each_ceiling_is_pinned_on_whoever_had_no_cpu_left(fig: LoadFigures, sample: ServerSample, phrase: str) -> None:
    assert attribute(fig, sample, 1.0).phrase().startswith(phrase)


def test_a_budgeted_target_is_crowded_by_its_neighbours_only_when_its_core_is_full() -> None:
    # The search preset at 150m: Postgres at 0.40 of CPU 0 beside the target at 73 % of its budget, the core
    # half idle, the quota throttling 43 % of periods. The target could have had its quota at any time.
    half_idle = budgeted(0.11, throttled=0.43, neighbours=0.40)
    assert attribute(figures(), half_idle, 0.15).kind == "undetermined"
    prompt = half_idle.model_copy(update={"dependency_rtt": probed(0.5)})
    assert attribute(figures(), prompt, 0.15, slo_ms=250).phrase() == "target on CPU 0"
    # The same target on a core its neighbours fill: it may not get even its quota.
    full = budgeted(0.11, throttled=0.20, neighbours=0.85)
    assert attribute(figures(), full, 0.15).phrase() == "neighbours on CPU 0"


def probed(p50_ms: float, n: int = 16, failed: int = 0) -> dict[str, ProbeFigures]:
    """Round trips to the stack's three dependencies through a step: Postgres and Redis at `p50_ms`."""
    fast: ProbeFigures = {"n": 16, "failed": 0, "p50_ms": 0.4, "max_ms": 2.0}
    dependency: ProbeFigures = {
        "n": n,
        "failed": failed,
        "p50_ms": p50_ms if n else None,
        "max_ms": p50_ms * 3 if n else None,
    }
    return {"postgres": dependency, "redis": dependency, "mock-upstream": fast}


@pytest.mark.parametrize(
    ("rtt", "kind"),
    [
        (probed(0.5), "target"),  # every dependency prompt: the target waited on itself
        (probed(8.0), "target"),  # within a tenth of the 100 ms SLO
        (probed(40.0), "undetermined"),  # Postgres and Redis queued: not the target's own waiting
        (probed(0.5, failed=2), "undetermined"),  # a dependency failed a probe
        (probed(0.5, n=2), "undetermined"),  # too few round trips to say
        ({}, "undetermined"),  # nothing probed (an app the lab did not write)
    ],
)
def test_a_target_idle_and_slow_while_its_dependencies_answer_promptly_is_its_own_bottleneck(
    rtt: dict[str, ProbeFigures], kind: str
) -> None:
    sample = server(0.3, {"0": 0.3, "1": 0.4}, {"k6": 0.2, "postgres": 0.1}).model_copy(update={"dependency_rtt": rtt})
    bottleneck = attribute(figures(), sample, 1.0, slo_ms=100)
    assert bottleneck.kind == kind, bottleneck
    if kind == "target":
        assert bottleneck.phrase() == "target on CPU 0"
        assert bottleneck.detail.startswith("its own waiting: no core >= 90% busy (target 30% of its core(s))")
        assert "mock-upstream 0.4 ms, postgres " in bottleneck.detail
    elif rtt:
        assert "dependency probes: mock-upstream median 0.4 ms" in bottleneck.detail, "the probes are shown"


def held(mean_ms: float, util: float = 0.1) -> LoadFigures:
    """A step where k6 dropped 168 arrivals, its one endpoint answering in `mean_ms` on average, with VUs
    started for answers of 1,010 ms (202 VUs at 200 req/s: the blocking target of the study's v1)."""
    endpoint = EndpointFigures(
        requests=600, share=1, expected_share=1, p50_ms=mean_ms, p99_ms=mean_ms * 3, error_rate=0,
        mean_ms=mean_ms, vu_pool_ms=1010,
    )  # fmt: skip
    return figures(util=util, dropped=168).model_copy(update={"endpoints": {"quote": endpoint}})


@pytest.mark.parametrize(
    ("fig", "rtt", "kind"),
    [
        (held(2400), probed(0.5), "target"),  # every VU waited on the target, its dependencies prompt
        (held(2400), probed(40.0), "undetermined"),  # ... or on dependencies that queued: not the target's own
        (held(600), probed(0.5), "generator"),  # the VUs it started could hold these answers: k6 fell behind
        (held(2400, util=0.9), probed(0.5), "generator"),  # k6 out of CPU: its own drops, whatever the answers
    ],
)
def test_arrivals_dropped_because_slow_answers_outgrew_the_vus_are_not_the_generators(
    fig: LoadFigures, rtt: dict[str, ProbeFigures], kind: str
) -> None:
    sample = server(0.26, {"0": 0.26, "1": 0.4}, {"k6": 0.1, "postgres": 0.1})
    bottleneck = attribute(fig, sample.model_copy(update={"dependency_rtt": rtt}), 1.0, slo_ms=100)
    assert bottleneck.kind == kind, bottleneck
    if kind == "target":
        assert "dropped 168 arrivals, its VUs outgrown by slow answers" in bottleneck.detail


def test_a_blocking_target_on_a_prompt_vendor_is_limited_by_its_own_waiting(stack: Stack, tmp_path: Path) -> None:
    # The study's v1: async def handlers calling the vendor with a blocking client hold the event loop for
    # each call, so one worker serves one request at a time: with 10 ms a call, at most about 100 req/s,
    # far from a full core. 200 req/s breaks the SLO while every dependency answers at once.
    path = tmp_path / "blocking.toml"
    path.write_text(
        f"""
name = "blocking"
repeats = 1
[defaults]
target = "baseline:naive_blocking"
server = "uvicorn"
cpus = "{TARGET_CPU}"
mix = "quotes"
rate = 200
duration_s = 4
warmup_s = 0
slo_p99_ms = 100
[defaults.upstream]
p50_ms = 10
p99_ms = 12
[[rung]]
label = "blocking"
"""
    )
    env = stack.env(PYTHONPATH=str(REPO))
    out = run_ladder(load_ladder(path), RunOptions(results_root=tmp_path / "results", base_env=env))
    rung: dict[str, Any] = json.loads((out / "results.json").read_text())["rungs"][0]
    assert set(rung["server"]["dependency_rtt"]) == {"postgres", "redis", "mock-upstream"}
    assert not rung["verdict"]["slo_met"], rung["figures"]
    bottleneck = rung["bottleneck"]
    # On a busy machine a neighbour may hold the target's core, or a dependency's: then it says so instead.
    neighbours = rung["server"]["neighbour_cores_mean"]
    if neighbours < 0.1 and max(rung["server"]["core_busy_mean"].values()) < 0.9:
        assert bottleneck["kind"] == "target", (bottleneck, rung["figures"]["endpoints"])
        assert bottleneck["detail"].startswith("its own waiting"), bottleneck
        assert rung["verdict"]["ceiling"] == f"target on CPU {TARGET_CPU}"


def test_the_ceiling_is_named_at_the_lowest_rate_that_failed_twice_not_at_a_stall() -> None:
    from tenk.lab.definition.ladder import RungConfig
    from tenk.lab.measuring.outcome import ceiling as ceiling_of

    stall = server(0.3, {"0": 0.3, "1": 0.99}, {"postgres": 0.9})  # a neighbour burst, measured again: passed
    ceiling = server(0.97, {"0": 0.99, "1": 0.4}, {"postgres": 0.2})
    steps = [
        Step(rate=100, figures=figures(), server=stall, passed=False, reasons=["p99", "unconfirmed: measured again"]),
        Step(rate=100, figures=figures(), server=server(0.3, {"0": 0.3, "1": 0.3}, {}), passed=True, reasons=[]),
        Step(rate=200, figures=figures(), server=ceiling, passed=False, reasons=["p99"]),
        Step(rate=200, figures=figures(), server=ceiling, passed=False, reasons=["p99"]),
    ]
    result = CapacityResult(
        capacity=100,
        converged=True,
        limited_by=["p99"],
        generator_limited=False,
        plan="plan",
        elapsed_s=1.0,
        steps=steps,
    )
    assert ceiling_of(result, figures(), ServerSample(), RungConfig(cpus="0")).phrase() == "target on CPU 0"


def test_an_undetermined_ceiling_names_who_used_what_and_the_busiest_besides_the_target() -> None:
    sample = server(0.45, {"0": 0.5, "1": 0.7}, {"k6": 0.4, "postgres": 0.25, "redis": 0.05})
    bottleneck = attribute(figures(), sample, 1.0)
    assert bottleneck.kind == "undetermined"
    assert bottleneck.name == "k6"
    phrase = bottleneck.phrase()
    assert "target 45%" in phrase
    assert "k6 0.40 cores, postgres 0.25 cores" in phrase
    assert phrase.endswith("busiest besides the target: k6)")


def test_the_report_prints_an_undetermined_ceiling_with_its_attribution() -> None:
    from tenk.lab.results.derivations import headline
    from tests.lab.test_compare import figures as figures_doc
    from tests.lab.test_compare import rung

    phrase = attribute(figures(), server(0.45, {"0": 0.5, "1": 0.7}, {"k6": 0.4}), 1.0).phrase()
    verdict = Verdict(server_figure=False, generator_bound=False, slo_met=False, notes=[], ceiling=phrase)
    limited = rung(0, "a", figures_doc(100, 0, 10.0, 300.0)).model_copy(
        update={"mode": "capacity", "value": 400, "verdict": verdict}
    )
    assert headline(limited) == f"≥ 400 req/s, limited by {phrase} (not the target's capacity)"
