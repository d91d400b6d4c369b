"""The labels on comparisons follow the interval, on synthetic figures whose effect is known."""

from __future__ import annotations

import random

from tenk.lab.results.stats import FASTER, INVALID, NO_CHANGE, SLOWER, compare, estimate, supports_regression


def noisy(center: float, n: int, spread: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_clear_gain_is_labelled_faster_and_a_clear_loss_slower() -> None:
    base = noisy(1000, 3, 0.02, 1)
    assert compare(base, noisy(1300, 3, 0.02, 2)).label == FASTER
    assert compare(base, noisy(700, 3, 0.02, 3)).label == SLOWER


def test_same_distribution_is_labelled_no_detectable_change() -> None:
    # Overlapping samples drawn from one distribution: no label may claim an effect.
    base, new = [980.0, 1000.0, 1020.0], [990.0, 1015.0, 975.0]
    assert compare(base, new).label == NO_CHANGE


def test_an_effect_smaller_than_the_noise_is_not_detected() -> None:
    assert compare([900.0, 1000.0, 1100.0], [950.0, 1050.0, 1150.0]).label == NO_CHANGE


def test_lower_is_better_figures_swap_the_labels() -> None:
    cpu_on, cpu_off = [0.50, 0.51, 0.49], [0.80, 0.82, 0.79]
    assert compare(cpu_off, cpu_on, higher_is_better=False, words=("lower", "higher")).label == "lower"


def test_one_run_a_side_is_never_a_verdict() -> None:
    assert compare([1000.0], [1500.0]).label == NO_CHANGE


def test_a_missing_side_is_an_invalid_comparison() -> None:
    assert compare([], [1.0]).label == INVALID


def test_regression_gate_needs_statistical_support_for_the_threshold() -> None:
    base = [1000.0, 1005.0, 995.0]
    assert supports_regression(compare(base, [900.0, 905.0, 895.0]), 0.05)  # a clear 10 % loss
    assert not supports_regression(compare(base, [980.0, 985.0, 975.0]), 0.05)  # 2 %: real but under 5 %
    assert not supports_regression(compare([900.0, 1000.0, 1100.0], [850.0, 950.0, 1050.0]), 0.05)  # noise


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
    assert comparison.low > 1, "the interval alone would have said faster"
    assert comparison.mann_whitney is not None
    assert comparison.mann_whitney.can_tell
    assert comparison.mann_whitney.p >= 0.05
    assert comparison.label == NO_CHANGE
    assert "no detectable difference" in comparison.show()


def test_with_three_repeats_a_side_the_verdict_says_the_rank_test_cannot_tell() -> None:
    comparison = compare([1000.0, 1010, 990], [1300.0, 1310, 1290])
    assert comparison.label == FASTER  # the bootstrap's interval, alone
    assert comparison.mann_whitney is not None
    assert not comparison.mann_whitney.can_tell
    assert "too few repeats" in comparison.show()
    assert "least p 0.10" in comparison.show()
