"""Statistics behind every verdict: a median with a 95 % interval, and a labelled comparison.

A bare ratio is never a verdict: two runs of the same rung differ by noise, so a comparison takes two
tests of the repeats and labels only what both support. A seeded bootstrap interval of the ratio of
medians says how large the change is; a Mann-Whitney U test of the repeats (exact, by enumerating every
split of the pooled values, so ties are handled; a normal approximation when there are too many splits),
with its effect P(new > base), says whether there is one.

- *better* / *worse*: the rank test finds a difference (p < 0.05) and the whole interval lies on that side
    of 1;
- *no detectable change*: the rank test could have found one with these repeats, and did not;
- *inconclusive (n = 3 + 3: ...)*: too few repeats for the rank test to reach p < 0.05 whatever the
    figures (its least p is 0.10 at three a side, 0.029 at four, 0.008 at five), so neither a change nor
    its absence is shown. With one repeat a side there is no spread either, and no interval is drawn.

The label is decided here once, and every output prints it as it is (`Comparison.shown`). The seed is
fixed so that the same figures always give the same label.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics

from tenk.lab.documents import BETTER, INCONCLUSIVE, NO_CHANGE, WORSE, Comparison, Estimate, RankTest

RESAMPLES = 10_000
SEED = 0
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
# Above this many splits of the pooled sample, the U statistic's normal approximation is used.
EXACT_SPLITS = 50_000
TEST_NAME = (
    f"bootstrap {CONFIDENCE:.0%} interval of the ratio of medians ({RESAMPLES:,} resamples, seed {SEED}), "
    f"and a two-sided Mann-Whitney U test (p < {ALPHA:.2f}) of the repeats"
)


def can_tell(test: RankTest) -> bool:
    """Whether these sample sizes let the rank test reach p < ALPHA at all."""
    return test.min_p < ALPHA


def describe(comparison: Comparison) -> str:
    """The label, then what it rests on: `better: 1.200x, 95 % CI 1.190–1.210; Mann-Whitney ...`."""
    if comparison.ratio is None:
        return comparison.shown
    figures = f"{comparison.ratio:.3f}x"
    if comparison.low is not None and comparison.high is not None:
        figures += f", 95 % CI {comparison.low:.3f}–{comparison.high:.3f}"
    test = comparison.rank_test
    if test is not None:
        how = "exact" if test.exact else "normal approx."
        figures += f"; Mann-Whitney U={test.u:g}, p={test.p:.3f} ({how}), P(new>base)={test.effect:.2f}"
        if not can_tell(test):
            figures += f", least p {test.min_p:.2f}"
    return f"{comparison.shown}: {figures}"


def _u(new: list[float], base: list[float]) -> float:
    return sum(1.0 if n > b else 0.5 if n == b else 0.0 for n in new for b in base)


def mann_whitney(base: list[float], new: list[float]) -> RankTest:
    """Two-sided: how often a split of the pooled values is at least as far from n1*n2/2 as this one."""
    n_new, n_base = len(new), len(base)
    pairs = n_new * n_base
    u = _u(new, base)
    centre = pairs / 2
    pooled = [*new, *base]
    if math.comb(n_new + n_base, n_new) <= EXACT_SPLITS:
        distances = []
        for chosen in itertools.combinations(range(len(pooled)), n_new):
            picked = set(chosen)
            left = [pooled[i] for i in chosen]
            right = [pooled[i] for i in range(len(pooled)) if i not in picked]
            distances.append(abs(_u(left, right) - centre))
        observed = abs(u - centre)
        p = sum(1 for d in distances if d >= observed - 1e-9) / len(distances)
        extreme = max(distances)
        min_p = sum(1 for d in distances if d >= extreme - 1e-9) / len(distances)
        return RankTest(u=u, p=p, effect=u / pairs, min_p=min_p, exact=True)
    # Normal approximation with the tie correction of the variance.
    total = n_new + n_base
    ties = sum(c**3 - c for c in _tie_sizes(pooled))
    variance = pairs / 12 * ((total + 1) - ties / (total * (total - 1)))
    z = (abs(u - centre) - 0.5) / math.sqrt(variance) if variance > 0 else 0.0
    p = min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))
    return RankTest(u=u, p=p, effect=u / pairs, min_p=0.0, exact=False)


def _tie_sizes(values: list[float]) -> list[int]:
    sizes: dict[float, int] = {}
    for value in values:
        sizes[value] = sizes.get(value, 0) + 1
    return [size for size in sizes.values() if size > 1]


def _quantile(sorted_values: list[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    lower = int(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * (position - lower)


def estimate(values: list[float] | tuple[float, ...]) -> Estimate:
    if not values:
        return Estimate(median=0.0, low=0.0, high=0.0, values=())
    data = tuple(float(v) for v in values)
    median = statistics.median(data)
    if len(data) < 2:
        return Estimate(median=median, low=median, high=median, values=data)
    rng = random.Random(SEED)
    medians = sorted(statistics.median(rng.choices(data, k=len(data))) for _ in range(RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    return Estimate(median=median, low=_quantile(medians, tail), high=_quantile(medians, 1 - tail), values=data)


def inconclusive(reason: str) -> Comparison:
    """Two figures that are not comparable: `reason` says why (named rungs, the part that is not the target's)."""
    return Comparison(label=INCONCLUSIVE, reason=reason)


def compare(base: list[float], new: list[float], higher_is_better: bool = True) -> Comparison:
    """Label NEW against BASE, one figure per repeat a side (see the module's docstring for the rule)."""
    base_values = [float(v) for v in base if v > 0]
    new_values = [float(v) for v in new if v > 0]
    if not base_values or not new_values:
        return inconclusive("a side has no positive figure")
    ratio = statistics.median(new_values) / statistics.median(base_values)
    sizes = {"n_base": len(base_values), "n_new": len(new_values)}
    too_few = f"n = {len(base_values)} + {len(new_values)}: too few repeats to tell"
    if min(len(base_values), len(new_values)) < 2:
        # No spread on one side at least: an interval would show only the other side's noise.
        return Comparison(label=INCONCLUSIVE, reason=too_few, ratio=ratio, **sizes)
    rng = random.Random(SEED)
    ratios = sorted(
        statistics.median(rng.choices(new_values, k=len(new_values)))
        / statistics.median(rng.choices(base_values, k=len(base_values)))
        for _ in range(RESAMPLES)
    )
    tail = (1 - CONFIDENCE) / 2
    low, high = _quantile(ratios, tail), _quantile(ratios, 1 - tail)
    test = mann_whitney(base_values, new_values)
    label, reason = INCONCLUSIVE, ""
    if not can_tell(test):
        reason = too_few
    elif test.p >= ALPHA:
        label = NO_CHANGE  # the rank test could have told, and did not: the interval alone is not enough
    elif low > 1 or high < 1:
        label = BETTER if (low > 1) == higher_is_better else WORSE
    else:
        reason = "the repeats' ranks differ but the interval of the ratio holds 1"
    return Comparison(label=label, reason=reason, ratio=ratio, low=low, high=high, rank_test=test, **sizes)


def supports_regression(comparison: Comparison, threshold: float, higher_is_better: bool = True) -> bool:
    """True only when NEW is labelled worse and its interval shows it worse by at least `threshold` (0.05 = 5 %)."""
    if comparison.label != WORSE or comparison.low is None or comparison.high is None:
        return False
    if higher_is_better:
        return comparison.high <= 1 - threshold
    return comparison.low >= 1 + threshold
