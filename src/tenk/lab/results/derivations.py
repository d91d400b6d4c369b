"""Figures derived from a results document: each rung's headline figure and CPU per request, the
comparison of one rung with another, and the check of a claim's expectations. Numbers, not pages: the
markdown and HTML reports, `tenk lab compare`, `tenk lab plan` and the live view all read them from here.

Every comparison a results document holds (each rung against the one before it, each claim's two rungs)
is judged once, by `judgements`, and written into results.json with its label; the reports print those
labels as they are.
"""

from __future__ import annotations

import itertools

from tenk.lab.definition import expectations
from tenk.lab.documents import (
    INCONCLUSIVE,
    Claim,
    Comparison,
    Judgement,
    Results,
    RungResult,
    ServerSample,
)
from tenk.lab.results.stats import compare, inconclusive

# For rates, "x" is to/from; for latency and errors, lower is better, so it is from/to.
HIGHER_IS_BETTER = {"rps": True, "capacity": True, "p99_ms": False, "errors": False, "cpu_ms": False}


def cpu_ms_per_request(rung: RungResult) -> float | None:
    """The target's CPU time per completed request, in ms; None when the target was not sampled.

    On a shared machine this is the steadiest figure: the kernel counts CPU time whether or not a
    neighbour delayed the process, while p99 and capacity move with the neighbours.
    """
    estimate = rung.cpu_ms_estimate
    if estimate is not None and estimate.values:
        return estimate.median
    cores, rps = rung.server.cpu_cores_mean, rung.figures.rps
    return cores * 1000 / rps if cores and rps else None


def metric_value(rung: RungResult, metric: str) -> float:
    figures = rung.figures
    if metric == "cpu_ms":
        return cpu_ms_per_request(rung) or 0.0
    if metric == "capacity":
        return rung.value if rung.mode == "capacity" else 0.0
    if metric == "rps":
        return figures.rps if rung.mode == "rate" else rung.value
    if metric == "p99_ms":
        return figures.p99_ms
    return figures.error_rate


def headline_metric(rung: RungResult) -> str:
    return "capacity" if rung.mode == "capacity" else "rps"


def target_in_flight_max(server: ServerSample) -> float | None:
    """The target's own in-flight gauge (tenk's upstream bulkhead), its peak during the step."""
    peaks = [g["max"] for key, g in server.gauges.items() if key.startswith("tenk_upstream_inflight")]
    return sum(peaks) if peaks else None


def quantity(rung: RungResult, name: str) -> float | None:
    """A claim expectation's quantity (`expectations.QUANTITIES`) as measured on `rung`; None if not."""
    figures, server = rung.figures, rung.server
    upstream, ingest = server.upstream, server.ingest
    found: dict[str, float | None] = {
        "goodput": figures.rps,
        "offered": figures.offered_rps,
        "capacity": rung.value if rung.mode == "capacity" else None,
        "p99_ms": figures.p99_ms,
        "error_rate": figures.error_rate,
        "cpu_ms": cpu_ms_per_request(rung),
        "upstream_in_flight": upstream.get("in_flight"),
        "upstream_in_flight_max": upstream.get("max_in_flight"),
        "target_in_flight_max": target_in_flight_max(server),
        "rows_landed_per_s": ingest.get("rows_landed_per_s"),
        "lag_p99_ms": ingest.get("lag_p99_ms"),
        "backlog_growth": ingest.get("backlog_growth"),
    }
    value = found.get(name)
    return None if value is None else float(value)


def check_expectations(claim: Claim, before: RungResult, after: RungResult) -> tuple[str, list[str]]:
    """(held | not held | not measured, one line per expectation with the values compared)."""
    rungs = {"from_rung": before, "to_rung": after}
    results, lines = [], []
    for text in claim.expect:
        result, shown = expectations.parse(text).check(lambda rung, name: quantity(rungs[rung], name))
        results.append(result)
        lines.append(f"{text}: {result} ({shown})")
    return expectations.verdict(results), lines


def ratio(before: float, after: float, metric: str) -> float | None:
    if HIGHER_IS_BETTER[metric]:
        return after / before if before else None
    return before / after if after else None


def repeat_values(rung: RungResult, metric: str) -> list[float]:
    """Every repeat's figure for `metric`; a result without repeats counts as one."""
    return [metric_value(repeat, metric) for repeat in rung.repeats or [rung]]


def is_server_figure(rung: RungResult) -> bool:
    return rung.verdict.server_figure


def ceiling(rung: RungResult) -> str:
    return rung.verdict.ceiling


def unconverged(rung: RungResult) -> str:
    """Why the rung's capacity search did not converge (in how many of its repeats), "" when every one did."""
    searches = [repeat.capacity for repeat in rung.repeats or [rung] if repeat.capacity is not None]
    stopped = [search.unconverged for search in searches if not search.converged]
    if not stopped:
        return ""
    share = f" in {len(stopped)} of {len(searches)} repeats" if len(searches) > 1 else ""
    return f"search did not converge{share}: {stopped[0]}"


def bound_by(rung: RungResult) -> str:
    """A few words on what set a figure that is not the target's: `k6-bound`, `postgres-bound`."""
    named = rung.bottleneck
    if named is not None and named.name:
        return f"{named.name}-bound"
    limit = ceiling(rung)
    if limit == "no ceiling reached":
        return "ceiling not reached"
    return f"{limit.split()[0]}-bound" if limit and limit != "undetermined" else "ceiling undetermined"


def not_the_targets(rung: RungResult) -> str:
    """Why the rung's headline is no figure of the target's, "" when it is one: a search that did not
    converge, one that passed no step, or a ceiling something other than the target set."""
    if rung.mode == "capacity":
        if why := unconverged(rung):
            return f"{rung.label} {why}"
        if rung.value == 0:
            return f"{rung.label}: no step within the SLO"
    if not is_server_figure(rung):
        return f"{rung.label} {bound_by(rung)}, not the target"
    return ""


def headline(rung: RungResult) -> str:
    """The rung's headline as a person should read it: a capacity only when it is the target's."""
    est = rung.estimate
    shown = est.show() if est is not None and len(est.values) > 1 else f"{rung.value:,.0f}"
    unit = "req/s capacity" if rung.mode == "capacity" else "req/s goodput"
    limit = ceiling(rung)
    if rung.mode == "capacity" and (why := unconverged(rung)):
        return f"≥ {shown} req/s ({why})"
    if rung.mode == "capacity" and not is_server_figure(rung):
        reason = f"limited by {limit}" if limit and limit != "no ceiling reached" else "ceiling not reached"
        return f"≥ {shown} req/s, {reason} (not the target's capacity)"
    return f"{shown} {unit}" + (f", limited by {limit}" if limit and limit != "no ceiling reached" else "")


def compare_rungs(before: RungResult, after: RungResult, metric: str) -> Comparison:
    """Label `after` against `before`. A headline that is not the target's (a ceiling something else set,
    a search that did not converge) cannot be compared: it would compare the neighbours, or how far a
    search got, not the change. Nor can a capacity be compared with a fixed rate's goodput."""
    if metric == "cpu_ms":
        return compare(repeat_values(before, metric), repeat_values(after, metric), higher_is_better=False)
    if metric in ("capacity", "rps"):
        if before.mode != after.mode:
            return inconclusive("a capacity against a fixed rate's goodput: not the same measure")
        reasons = [why for rung in (before, after) if (why := not_the_targets(rung))]
        if reasons:
            return inconclusive("; ".join(reasons))
    return compare(repeat_values(before, metric), repeat_values(after, metric), HIGHER_IS_BETTER[metric])


REPRODUCED, REFUTED = "reproduced", "refuted"


def claim_verdict(claim: Claim, comparison: Comparison, before: RungResult, after: RungResult) -> str:
    """What the measured pair makes of a claim: reproduced (exceeded), refuted, or inconclusive and why.

    A qualitative claim is its expectations, held or not. A claimed ratio is reproduced when the measured
    interval holds it, exceeded when the whole interval lies above it, and refuted when it lies below;
    a comparison that is itself inconclusive leaves the claim so, for the same reason.
    """
    if comparison.ratio is None:
        return comparison.shown
    if claim.expect:
        held, _ = check_expectations(claim, before, after)
        return {"held": REPRODUCED, "not held": REFUTED}.get(held, f"{INCONCLUSIVE} ({held})")
    claimed = claim.claimed_ratio
    if claimed is None or comparison.label == INCONCLUSIVE or comparison.low is None or comparison.high is None:
        return comparison.shown
    # The claim's ratio is oriented better-is-bigger (to/from, or from/to for lower-is-better metrics).
    low, high = comparison.low, comparison.high
    if not HIGHER_IS_BETTER[claim.metric]:
        low, high = 1 / high, 1 / low
    if low <= claimed <= high:
        return REPRODUCED
    return f"{REPRODUCED} (exceeded)" if low > claimed else REFUTED


def judge_step(before: RungResult, after: RungResult) -> Judgement:
    """A rung against the one before it: its headline, and the target's CPU ms per request."""
    metric = headline_metric(after)
    return Judgement(
        base=before.label,
        new=after.label,
        metric=metric,
        comparison=compare_rungs(before, after, metric),
        cpu=compare_rungs(before, after, "cpu_ms"),
    )


def judge_claim(claim: Claim, before: RungResult, after: RungResult) -> Judgement:
    comparison = compare_rungs(before, after, claim.metric)
    return Judgement(
        base=before.label, new=after.label, metric=claim.metric, comparison=comparison, claim=claim.text,
        verdict=claim_verdict(claim, comparison, before, after),
    )  # fmt: skip


def judgements(results: Results) -> list[Judgement]:
    """Every comparison the reports print: each rung against the one before it, then each claim whose two
    rungs were measured."""
    rungs = results.rungs
    found = [judge_step(before, after) for before, after in itertools.pairwise(rungs)]
    by_label = {rung.label: rung for rung in rungs}
    for claim in results.claims:
        before, after = by_label.get(claim.from_rung), by_label.get(claim.to_rung)
        if before is not None and after is not None:
            found.append(judge_claim(claim, before, after))
    return found


def judged(results: Results) -> list[Judgement]:
    """The comparisons as results.json holds them; judged here for a file written before it held any."""
    return results.comparisons or judgements(results)


def with_judgements(results: Results) -> Results:
    """`results` carrying its comparisons, judged from its rungs (as they are written, merged or not)."""
    return results.model_copy(update={"comparisons": judgements(results)})


def step_judgement(results: Results, new: str) -> Judgement | None:
    """The comparison of rung `new` with the rung before it."""
    return next((j for j in judged(results) if j.new == new and not j.claim), None)
