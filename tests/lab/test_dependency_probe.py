"""The dependency probe times round trips to the servers the lab runs all through a step, and reports one
it cannot reach as failed, never as prompt. Real Postgres and Redis (the shared stack); a closed port for
the one that is not there."""

from __future__ import annotations

from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.lab.documents import ServerSample
from tenk.lab.measuring.bottleneck import prompt_dependencies
from tenk.lab.measuring.dependency_probe import DependencyProbe
from tenk.stack._ports import free_port
from tests.support.waiting import eventually_blocking


def test_the_probe_times_round_trips_to_each_dependency_named_in_the_environment(stack: Stack) -> None:
    env = {"TENK_DATABASE_URL": stack.pg.url, "TENK_REDIS_URL": stack.redis.url, "TENK_UPSTREAM_URL": ""}
    with DependencyProbe(env, interval_s=0.01) as probe:
        # Five round trips each take a few ms idle; the deadline grows with what this machine measured.
        eventually_blocking(
            lambda: all(figures["n"] >= 5 for figures in probe.figures().values()), 30, "five round trips to each"
        )
    figures = probe.figures()
    assert set(figures) == {"postgres", "redis"}, "only what the environment names; an empty URL is no dependency"
    for name, answered in figures.items():
        assert answered["failed"] == 0, name
        p50, slowest = answered["p50_ms"], answered["max_ms"]
        assert p50 is not None, name
        assert slowest is not None, name
        assert 0 < p50 <= slowest, name


def test_a_dependency_that_cannot_be_reached_is_failed_and_never_prompt(stack: Stack) -> None:
    closed = free_port()
    env = {"TENK_DATABASE_URL": stack.pg.url, "TENK_REDIS_URL": f"redis://127.0.0.1:{closed}/0"}
    with DependencyProbe(env, interval_s=0.01) as probe:
        eventually_blocking(lambda: probe.figures()["postgres"]["n"] >= 5, deadline_s(), "five round trips to Postgres")
    figures = probe.figures()
    assert figures["redis"] == {"n": 0, "failed": 1, "p50_ms": None, "max_ms": None}
    # Prompt is judged against the slowest round trip Postgres took here, not a fixed bound: a busy machine
    # slows a trivial query past the lab's default, and this test is about the failed one.
    slowest = figures["postgres"]["max_ms"]
    assert slowest is not None
    assert prompt_dependencies(ServerSample(dependency_rtt=figures), within_ms=slowest) == ""
    reachable = ServerSample(dependency_rtt={"postgres": figures["postgres"]})
    assert prompt_dependencies(reachable, within_ms=slowest).startswith("postgres ")
