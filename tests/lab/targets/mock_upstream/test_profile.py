"""The mock vendor's latency model: a lognormal fixed by p50 and p99, shares of errors and hangs."""

from __future__ import annotations

import math
import statistics

import pytest

from tenk.lab.targets.mock_upstream import Outcome, Profile, ProfileError, Sampler


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


@pytest.mark.parametrize(("p50_ms", "p99_ms"), [(40, 400), (4000, 22000)])
def test_drawn_delays_have_the_asked_p50_and_p99(p50_ms: float, p99_ms: float) -> None:
    sampler = Sampler(Profile(p50_ms=p50_ms, p99_ms=p99_ms), seed=7)
    delays_ms = [sampler.draw().delay_s * 1000 for _ in range(40_000)]
    assert _quantile(delays_ms, 0.50) == pytest.approx(p50_ms, rel=0.04)
    assert _quantile(delays_ms, 0.99) == pytest.approx(p99_ms, rel=0.10)
    assert min(delays_ms) > 0


def test_the_same_seed_gives_the_same_draws_and_another_seed_does_not() -> None:
    profile = Profile(p50_ms=40, p99_ms=400, error_rate=0.1, hang_rate=0.05)
    first = [Sampler(profile, seed=3).draw() for _ in range(1)]
    a, b, c = Sampler(profile, seed=3), Sampler(profile, seed=3), Sampler(profile, seed=4)
    draws_a = [a.draw() for _ in range(500)]
    assert draws_a == [b.draw() for _ in range(500)]
    assert draws_a != [c.draw() for _ in range(500)]
    assert draws_a[0] == first[0]


def test_error_and_hang_rates_are_the_shares_of_outcomes() -> None:
    sampler = Sampler(Profile(p50_ms=1, p99_ms=2, error_rate=0.2, hang_rate=0.1), seed=1)
    outcomes = [sampler.draw().outcome for _ in range(20_000)]
    assert outcomes.count(Outcome.ERROR) / len(outcomes) == pytest.approx(0.2, abs=0.015)
    assert outcomes.count(Outcome.HANG) / len(outcomes) == pytest.approx(0.1, abs=0.015)


def test_zero_delay_and_constant_delay() -> None:
    assert {Sampler(Profile(p50_ms=0, p99_ms=0)).draw().delay_s for _ in range(10)} == {0.0}
    constant = Sampler(Profile(p50_ms=250, p99_ms=250))
    assert statistics.fmean(constant.draw().delay_s for _ in range(10)) == 0.25


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"p50_ms": -1}, "p50_ms"),
        ({"p50_ms": 100, "p99_ms": 50}, "p99_ms"),
        ({"error_rate": 1.5}, "error_rate"),
        ({"hang_rate": -0.1}, "hang_rate"),
        ({"error_rate": 0.6, "hang_rate": 0.6}, "hang_rate"),
        ({"p99_ms": math.inf}, "p99_ms"),
    ],
)
def test_impossible_profiles_are_refused_naming_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ProfileError) as caught:
        Profile(**kwargs)
    assert caught.value.field == field


def test_changing_only_p50_keeps_the_spread() -> None:
    assert Profile(p50_ms=40, p99_ms=400).updated({"p50_ms": 4000}) == Profile(p50_ms=4000, p99_ms=40_000)
    with pytest.raises(ProfileError, match="unknown field"):
        Profile().updated({"p95_ms": 3})
    with pytest.raises(ProfileError, match="must be a number"):
        Profile().updated({"p50_ms": True})
