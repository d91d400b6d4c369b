"""The labels on comparisons follow the interval, on synthetic figures whose effect is known."""

from __future__ import annotations

import random

from tenk.lab.documents import BETTER, INCONCLUSIVE, NO_CHANGE, WORSE
from tenk.lab.results.stats import can_tell, compare, describe, estimate, supports_regression


def noisy(center: float, n: int, spread: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_clear_gain_is_labelled_better_and_a_clear_loss_worse() -> None:
    base = noisy(1000, 5, 0.02, 1)
    assert compare(base, noisy(1300, 5, 0.02, 2)).label == BETTER
    assert compare(base, noisy(700, 5, 0.02, 3)).label == WORSE


def test_same_distribution_is_labelled_no_detectable_change() -> None:
    # Overlapping samples drawn from one distribution, five a side: the rank test could tell, and does not.
    base, new = [980.0, 1000.0, 1020.0, 1010.0, 990.0], [990.0, 1015.0, 975.0, 1005.0, 995.0]
    assert compare(base, new).label == NO_CHANGE


def test_an_effect_smaller_than_the_noise_is_not_detected() -> None:
    base = [900.0, 1000.0, 1100.0, 950.0, 1050.0]
    assert compare(base, [950.0, 1050.0, 1150.0, 1000.0, 1100.0]).label == NO_CHANGE


def test_lower_is_better_figures_swap_the_labels() -> None:
    cpu_on, cpu_off = [0.50, 0.51, 0.49, 0.50, 0.52], [0.80, 0.82, 0.79, 0.81, 0.80]
    assert compare(cpu_off, cpu_on, higher_is_better=False).label == BETTER
    assert compare(cpu_on, cpu_off, higher_is_better=False).label == WORSE


def test_one_run_a_side_is_inconclusive_and_draws_no_interval() -> None:
    comparison = compare([1000.0], [1500.0])
    assert comparison.shown == "inconclusive (n = 1 + 1: too few repeats to tell)"
    assert (comparison.ratio, comparison.low, comparison.high) == (1.5, None, None)
    assert "CI" not in describe(comparison)
    # The same two figures never read "no detectable change", nor a zero-width interval.
    assert compare([1000.0], [1000.0]).shown == comparison.shown
    assert "1.000–1.000" not in describe(compare([1000.0], [1000.0]))


def test_with_fewer_repeats_than_the_rank_test_needs_the_label_is_inconclusive_whatever_the_figures() -> None:
    # Three a side, fully apart: the rank test's least p is 0.10, so it cannot tell, and neither may the label.
    apart = compare([1000.0, 1010, 990], [1300.0, 1310, 1290])
    assert apart.label == INCONCLUSIVE
    assert apart.shown == "inconclusive (n = 3 + 3: too few repeats to tell)"
    assert apart.low is not None
    assert apart.low > 1, "the interval is still drawn from three a side"
    overlapping = compare([980.0, 1000.0, 1020.0], [990.0, 1015.0, 975.0])
    assert overlapping.shown == apart.shown, "never no detectable change from too few repeats"
    # Four a side can reach p < 0.05 (2 of 70 splits as extreme): fully apart, the label is earned.
    assert compare([1000.0, 1010, 990, 1005], [1300.0, 1310, 1290, 1305]).label == BETTER


def test_a_missing_side_is_inconclusive() -> None:
    assert compare([], [1.0]).shown == "inconclusive (a side has no positive figure)"


def test_regression_gate_needs_statistical_support_for_the_threshold() -> None:
    base = [1000.0, 1005.0, 995.0, 1002.0, 998.0]
    assert supports_regression(compare(base, [900.0, 905.0, 895.0, 902.0, 898.0]), 0.05)  # a clear 10 % loss
    assert not supports_regression(compare(base, [980.0, 985.0, 975.0, 982.0, 978.0]), 0.05)  # 2 %: under 5 %
    noise = [900.0, 1000.0, 1100.0, 950.0, 1050.0]
    assert not supports_regression(compare(noise, [850.0, 950.0, 1050.0, 900.0, 1000.0]), 0.05)
    # Three a side cannot be labelled worse, so they never fail a build, however far apart.
    assert not supports_regression(compare(base[:3], [500.0, 505.0, 495.0]), 0.05)


def test_estimate_interval_brackets_the_median() -> None:
    figure = estimate([10.0, 12.0, 11.0])
    assert figure.median == 11.0
    assert figure.low <= 11.0 <= figure.high
    assert estimate([5.0]).show() == "5"


def test_mann_whitney_gives_the_exact_two_sided_p_and_its_effect() -> None:
    from tenk.lab.results.stats import mann_whitney

    # Five against five, fully separated: 2 of the C(10, 5) = 252 splits are as extreme.
    test = mann_whitney([1.0, 2, 3, 4, 5], [6.0, 7, 8, 9, 10])
    assert test.exact
    assert test.u == 25
    assert test.effect == 1.0
    assert abs(test.p - 2 / 252) < 1e-12
    # The same values shuffled between the sides: no effect, p = 1.
    same = mann_whitney([1.0, 2, 3, 4, 5], [3.0, 2, 4, 1, 5])
    assert same.effect == 0.5
    assert same.p == 1.0


def test_a_rank_test_that_could_tell_and_did_not_makes_the_label_no_detectable_change() -> None:
    # Seven a side: the bootstrap's interval of the median ratio just clears 1, but the ranks
    # overlap; Mann-Whitney could reach p < 0.05 with seven a side, and does not (p = 0.056).
    base = [100.4, 101.1, 100.2, 100.4, 97.8, 99.5, 100.8]
    new = [98.8, 100.6, 102.2, 101.1, 104.1, 102.9, 101.0]
    comparison = compare(base, new)
    assert comparison.low is not None
    assert comparison.low > 1, "the interval alone would have said better"
    assert comparison.rank_test is not None
    assert can_tell(comparison.rank_test)
    assert comparison.rank_test.p >= 0.05
    assert comparison.label == NO_CHANGE
    assert describe(comparison).startswith("no detectable change: 1.007x, 95 % CI 1.002–1.034")


def test_with_three_repeats_a_side_the_description_gives_the_rank_tests_least_p() -> None:
    comparison = compare([1000.0, 1010, 990], [1300.0, 1310, 1290])
    assert comparison.rank_test is not None
    assert not can_tell(comparison.rank_test)
    assert "least p 0.10" in describe(comparison)
