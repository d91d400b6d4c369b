"""Statistics behind every verdict: a median with a 95 % interval, and a labelled comparison.

A bare ratio is never a verdict: two runs of the same rung differ by noise, so every comparison
is a seeded bootstrap interval of the ratio of medians, and the label follows the interval:
*faster* / *slower* only when the whole interval lies on one side of 1, else *no detectable
change*. The seed is fixed so that the same figures always give the same label.

Beside it, a Mann-Whitney U test of the two samples (exact, by enumerating every split of the
pooled values, so ties are handled; a normal approximation when there are too many splits), with
its effect: P(new > base), the chance a repeat of NEW beats one of BASE. When the test could have
reached p < 0.05 with these sample sizes and did not, the label is *no detectable change* whatever
the bootstrap says. With 3 repeats a side it cannot (its smallest two-sided p is 0.10): the
verdict then says so, and rests on the bootstrap alone.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass

from tenk.lab.documents import Estimate

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

FASTER = "faster"
SLOWER = "slower"
NO_CHANGE = "no detectable change"
INVALID = "invalid comparison"


@dataclass(frozen=True)
class MannWhitney:
    """Two-sided Mann-Whitney U of NEW against BASE."""

    u: float  # pairs where NEW > BASE, ties counting a half
    p: float
    effect: float  # P(new > base) = u / (n_new * n_base); 0.5 is no effect
    min_p: float  # the smallest p these sample sizes can give: at or above ALPHA the test cannot tell
    exact: bool

    @property
    def can_tell(self) -> bool:
        return self.min_p < ALPHA

    def show(self) -> str:
        how = "exact" if self.exact else "normal approx."
        text = f"Mann-Whitney U={self.u:g}, p={self.p:.3f} ({how}), P(new>base)={self.effect:.2f}"
        if not self.can_tell:
            return f"{text}; too few repeats for it to reach p < {ALPHA:.2f} (least p {self.min_p:.2f})"
        if self.p >= ALPHA:
            return f"{text}: no detectable difference"
        return text


@dataclass(frozen=True)
class Comparison:
    """NEW against BASE: the ratio of medians (new / base), its interval, and what it supports."""

    ratio: float
    low: float
    high: float
    label: str
    test: str
    mann_whitney: MannWhitney | None = None

    def show(self) -> str:
        if self.label == INVALID:
            return f"{self.label}: {self.test}"
        text = f"{self.label} ({self.ratio:.3f}x, 95 % CI {self.low:.3f}–{self.high:.3f}"
        return text + (f"; {self.mann_whitney.show()})" if self.mann_whitney is not None else ")")


def _u(new: list[float], base: list[float]) -> float:
    return sum(1.0 if n > b else 0.5 if n == b else 0.0 for n in new for b in base)


def mann_whitney(base: list[float], new: list[float]) -> MannWhitney:
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
        return MannWhitney(u, p, u / pairs, min_p, exact=True)
    # Normal approximation with the tie correction of the variance.
    total = n_new + n_base
    ties = sum(c**3 - c for c in _tie_sizes(pooled))
    variance = pairs / 12 * ((total + 1) - ties / (total * (total - 1)))
    z = (abs(u - centre) - 0.5) / math.sqrt(variance) if variance > 0 else 0.0
    p = min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))
    return MannWhitney(u, p, u / pairs, 0.0, exact=False)


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


def compare(
    base: list[float], new: list[float], higher_is_better: bool = True, words: tuple[str, str] = (FASTER, SLOWER)
) -> Comparison:
    """Label NEW against BASE. With one value a side there is no spread to judge noise by, so the
    label is *no detectable change*: a single run proves nothing either way. `words` name the better
    and the worse outcome (*faster*/*slower* for rates; *lower*/*higher* suit CPU per request)."""
    base_values = [float(v) for v in base if v > 0]
    new_values = [float(v) for v in new if v > 0]
    if not base_values or not new_values:
        return Comparison(0.0, 0.0, 0.0, INVALID, "a side has no positive figure")
    ratio = statistics.median(new_values) / statistics.median(base_values)
    if len(base_values) < 2 and len(new_values) < 2:
        return Comparison(ratio, ratio, ratio, NO_CHANGE, "one run a side: no spread to test against")
    rng = random.Random(SEED)
    ratios = sorted(
        statistics.median(rng.choices(new_values, k=len(new_values)))
        / statistics.median(rng.choices(base_values, k=len(base_values)))
        for _ in range(RESAMPLES)
    )
    tail = (1 - CONFIDENCE) / 2
    low, high = _quantile(ratios, tail), _quantile(ratios, 1 - tail)
    better, worse = words
    test = mann_whitney(base_values, new_values)
    if test.can_tell and test.p >= ALPHA:
        label = NO_CHANGE  # a rank test that could have told, and did not: the interval alone is not enough
    elif low > 1:
        label = better if higher_is_better else worse
    elif high < 1:
        label = worse if higher_is_better else better
    else:
        label = NO_CHANGE
    return Comparison(ratio, low, high, label, TEST_NAME, test)


def supports_regression(comparison: Comparison, threshold: float, higher_is_better: bool = True) -> bool:
    """True only when the interval shows NEW worse than BASE by at least `threshold` (0.05 = 5 %)."""
    if comparison.label == INVALID:
        return False
    if higher_is_better:
        return comparison.high <= 1 - threshold
    return comparison.low >= 1 + threshold
