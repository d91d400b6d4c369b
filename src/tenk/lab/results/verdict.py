"""The report's first screen: one line per comparison, readable in ten seconds, and the words every other
output uses for a comparison.

Each line names what changed (a rung against the rung before it, or a claim's two rungs), the effect with
its 95 % interval, and its label, as `derivations.judgements` decided it: the rung table, the claims
table, `tenk lab compare` and the live view print the same label for the same pair. A headline that is not
the target's (a ceiling something else set, a search that did not converge) is not compared: its line
says why, and falls back to CPU ms per request, which the kernel counts whatever the neighbours do. Why
each rung stopped where it did is said once, in the rung table, not repeated here.
"""

from __future__ import annotations

from tenk.lab.documents import Comparison, Judgement, Results
from tenk.lab.results.derivations import HIGHER_IS_BETTER, judged

_NAMES = {"capacity": "capacity", "rps": "goodput", "cpu_ms": "CPU ms/request", "p99_ms": "p99", "errors": "errors"}


def change(comparison: Comparison) -> str:
    """`+38 % [+31, +45]`: new against base in per cent, with its interval when there is one; "" when the
    two figures are not comparable."""
    if comparison.ratio is None:
        return ""
    # A no-break space keeps "-9 %" on one line when the page wraps.
    shown = f"{_pct(comparison.ratio)}\u00a0%"
    if comparison.low is not None and comparison.high is not None:
        shown += f" [{_pct(comparison.low)}, {_pct(comparison.high)}]"
    return shown


def labelled(comparison: Comparison) -> str:
    """The change and its label, as every table cell and line prints them: `+38 % [+31, +45]: better`."""
    shown = change(comparison)
    return f"{shown}: {comparison.shown}" if shown else comparison.shown


def effect(metric: str, comparison: Comparison) -> str:
    """`capacity +38 % [+31, +45]: better`, or `capacity: inconclusive (...)`."""
    name = _NAMES.get(metric, metric)
    shown = change(comparison)
    return f"{name} {shown}: {comparison.shown}" if shown else f"{name}: {comparison.shown}"


def oriented(comparison: Comparison, metric: str) -> tuple[float, float | None, float | None] | None:
    """The measured ratio and its interval the way a claim states a ratio: to/from, or from/to for
    lower-is-better metrics (times lower); None when the two figures are not comparable."""
    ratio, low, high = comparison.ratio, comparison.low, comparison.high
    if ratio is None:
        return None
    if HIGHER_IS_BETTER[metric]:
        return ratio, low, high
    return 1 / ratio, (1 / high if high is not None else None), (1 / low if low is not None else None)


def times(comparison: Comparison, metric: str) -> str:
    """`1.38x [1.31–1.45]`, oriented as a claim is (`oriented`); "-" when not comparable."""
    found = oriented(comparison, metric)
    if found is None:
        return "-"
    ratio, low, high = found
    interval = f" [{low:.2f}–{high:.2f}]" if low is not None and high is not None else ""
    return f"{ratio:.2f}x{interval}"


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}"


def step_line(judgement: Judgement, changed: str) -> str:
    """A rung against the one before it: its headline, then its CPU ms per request when that was measured."""
    what = f"**{judgement.new}** vs {judgement.base} ({changed})"
    parts = [effect(judgement.metric, judgement.comparison)]
    cpu = judgement.cpu
    if cpu is not None and cpu.ratio is not None:
        parts.append(effect("cpu_ms", cpu))
    return f"{what}: " + "; ".join(parts)


def claim_line(judgement: Judgement, claimed_ratio: float | None) -> str:
    """A claim: the effect measured with its label, then the claim's verdict (said once when it is the
    comparison's own, an inconclusive one)."""
    what = f"**Claim** “{_short(judgement.claim)}” ({judgement.base} → {judgement.new})"
    measured = effect(judgement.metric, judgement.comparison)
    stated = f"claimed {claimed_ratio:.2f}x" if claimed_ratio is not None else "its expectations"
    if judgement.verdict == judgement.comparison.shown:
        return f"{what}: {measured}; {stated}"
    return f"{what}: {measured}; {stated}: {judgement.verdict}"


def _short(text: str, limit: int = 80) -> str:
    """A claim's first words: its whole text is in the claims table, a line here must stay one line."""
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def comparison_lines(results: Results) -> list[str]:
    """One line per change along the ladder, then one per claim."""
    changed = {rung.label: rung.changed for rung in results.rungs}
    claimed = {claim.text: claim.claimed_ratio for claim in results.claims}
    return [
        claim_line(j, claimed.get(j.claim)) if j.claim else step_line(j, changed.get(j.new, ""))
        for j in judged(results)
    ]
