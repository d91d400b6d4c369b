"""The report's first screen: one line per comparison, readable in ten seconds.

Each line names what changed (a rung against the rung before it, or a claim's two rungs), the
effect with its 95 % interval, and a label. A capacity set by something other than the target (the
generator, a dependency, an undetermined ceiling) is not the target's, so its line says what set it
and falls back to CPU ms per request, which the kernel counts whatever the neighbours do. Why each
rung stopped where it did is said once, in the rung table, not repeated here.
"""

from __future__ import annotations

import itertools

from tenk.lab.documents import Claim, Results, RungResult
from tenk.lab.results.derivations import (
    HIGHER_IS_BETTER,
    ceiling,
    check_expectations,
    compare_rungs,
    headline_metric,
    is_server_figure,
)
from tenk.lab.results.stats import INVALID, NO_CHANGE, Comparison

_NAMES = {"capacity": "capacity", "rps": "goodput", "cpu_ms": "CPU ms/request", "p99_ms": "p99", "errors": "errors"}
BETTER, WORSE, NO_DIFFERENCE, INCONCLUSIVE = "better", "worse", "no difference", "inconclusive"
REPRODUCED, REFUTED = "reproduced", "refuted"


def effect(metric: str, comparison: Comparison) -> str:
    """`capacity +38 % [+31, +45]`: the change of new against base, in per cent, with its interval."""
    name = _NAMES.get(metric, metric)
    if comparison.low == comparison.high:
        return f"{name} {_pct(comparison.ratio)}\u00a0%"
    # A no-break space keeps "-9 %" on one line when the page wraps.
    return f"{name} {_pct(comparison.ratio)}\u00a0% [{_pct(comparison.low)}, {_pct(comparison.high)}]"


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}"


def bound_by(rung: RungResult) -> str:
    """A few words on what set a figure that is not the target's: `k6-bound`, `postgres-bound`."""
    named = rung.bottleneck
    if named is not None and named.name:
        return f"{named.name}-bound"
    limit = ceiling(rung)
    if limit == "no ceiling reached":
        return "ceiling not reached"
    return f"{limit.split()[0]}-bound" if limit and limit != "undetermined" else "ceiling undetermined"


def _label(comparison: Comparison) -> str:
    if comparison.label == INVALID:
        return INCONCLUSIVE
    if comparison.low == comparison.high:
        return f"{INCONCLUSIVE}, one run a side"
    if comparison.label == NO_CHANGE:
        return NO_DIFFERENCE
    return BETTER if comparison.label in ("faster", "lower") else WORSE


def rung_line(before: RungResult, after: RungResult) -> str:
    # A capacity rung against a fixed-rate rung: goodput is the figure both measured.
    metric = headline_metric(after) if before.mode == after.mode else "rps"
    cpu = compare_rungs(before, after, "cpu_ms")
    cpu_part = "" if cpu.label == INVALID else f"{effect('cpu_ms', cpu)} ({_label(cpu)})"
    what = f"**{after.label}** vs {before.label} ({after.changed})"
    if is_server_figure(before) and is_server_figure(after):
        head = compare_rungs(before, after, metric)
        parts = [f"{effect(metric, head)} ({_label(head)})", *([cpu_part] if cpu_part else [])]
        return f"{what}: " + "; ".join(parts)
    fallback = f"; {cpu_part}" if cpu_part else ""
    return f"{what}: {_NAMES[metric]} {_not_the_targets(before, after)}: {INCONCLUSIVE}{fallback}"


def _not_the_targets(before: RungResult, after: RungResult) -> str:
    """Why a pair has no comparable figure: a capacity search that passed no step (its target may well have
    been the bottleneck: it just never met the SLO), or a figure something other than the target set."""
    failed = [r for r in (before, after) if r.mode == "capacity" and r.value == 0]
    limited = [r for r in (before, after) if not is_server_figure(r) and r not in failed]
    parts = []
    if failed:
        parts.append(f"no step within the SLO ({', '.join(r.label for r in failed)})")
    if limited:
        parts.append(f"not the target's ({', '.join(f'{r.label} {bound_by(r)}' for r in limited)})")
    return "; ".join(parts)


def claim_line(claim: Claim, before: RungResult, after: RungResult) -> str:
    comparison = compare_rungs(before, after, claim.metric)
    what = f"**Claim** “{_short(claim.text)}” ({claim.from_rung} → {claim.to_rung})"
    if comparison.label == INVALID:
        return f"{what}: {_not_the_targets(before, after) or comparison.test}: {INCONCLUSIVE}"
    shown = effect(claim.metric, comparison)
    if claim.expect:
        held, _ = check_expectations(claim, before, after)
        label = {"held": REPRODUCED, "not held": REFUTED}.get(held, f"{INCONCLUSIVE}, {held}")
        return f"{what}: {shown}: {label}"
    claimed = claim.claimed_ratio
    if claimed is None:
        return f"{what}: {shown}: {_label(comparison)}"
    # The claim's ratio is oriented better-is-bigger (to/from, or from/to for lower-is-better metrics).
    low, high = comparison.low, comparison.high
    if not HIGHER_IS_BETTER[claim.metric]:
        low, high = 1 / high, 1 / low
    if low <= claimed <= high:
        return f"{what}: {shown}, claimed {claimed:.2f}x: {REPRODUCED}"
    if comparison.low == comparison.high:
        return f"{what}: {shown}, claimed {claimed:.2f}x: {INCONCLUSIVE}, one run a side"
    measured = f"measured {low:.2f}–{high:.2f}x"
    if low > claimed:
        return f"{what}: {shown}, claimed {claimed:.2f}x, {measured}: {REPRODUCED} (exceeded)"
    return f"{what}: {shown}, claimed {claimed:.2f}x, {measured}: {REFUTED}"


def _short(text: str, limit: int = 80) -> str:
    """A claim's first words: its whole text is in the claims table, a line here must stay one line."""
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def comparison_lines(results: Results) -> list[str]:
    """One line per change along the ladder, then one per claim."""
    rungs = results.rungs
    lines = [rung_line(before, after) for before, after in itertools.pairwise(rungs)]
    by_label = {rung.label: rung for rung in rungs}
    for claim in results.claims:
        before, after = by_label.get(claim.from_rung), by_label.get(claim.to_rung)
        if before is not None and after is not None:
            lines.append(claim_line(claim, before, after))
    return lines
