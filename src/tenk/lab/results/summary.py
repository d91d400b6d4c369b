"""One rung's repeats folded into its headline: the median with a 95 % interval, and the ceiling.

Input: the per-repeat rung results the runner writes (each a full rung document). Output: the
rung document of the median repeat (so its figures, server sample and capacity steps are real
measurements, not averages), with `value` set to the median and beside it `estimate`,
`cpu_ms_estimate`, `repeats` and `bottlenecks`.
"""

from __future__ import annotations

import copy
from collections import Counter

from tenk.lab.results.documents import EstimateDoc, RungDoc
from tenk.lab.results.stats import Estimate, estimate


def summarise_rung(repeats: list[RungDoc]) -> RungDoc:
    if not repeats:
        raise ValueError("a rung needs at least one repeat")
    values = [float(r["value"]) for r in repeats]
    order = sorted(range(len(repeats)), key=lambda i: values[i])
    median_repeat = repeats[order[(len(order) - 1) // 2]]
    rung = copy.deepcopy(median_repeat)
    rung.pop("repeat", None)
    headline = estimate(values)
    rung["value"] = headline.median
    rung["estimate"] = estimate_doc(headline)
    cpu = [float(r["cpu_ms"]["target"]) for r in repeats if r.get("cpu_ms", {}).get("target")]
    rung["cpu_ms_estimate"] = estimate_doc(estimate(cpu)) if cpu else None
    phrases = [r["verdict"].get("ceiling", "") for r in repeats]
    rung["bottlenecks"] = phrases
    # The ceiling most repeats agree on; a split is itself worth reading, so all are kept above.
    common = Counter(phrases).most_common(1)[0][0]
    named = [r["bottleneck"] for r in repeats if "bottleneck" in r and r["verdict"].get("ceiling", "") == common]
    if named:
        rung["bottleneck"] = named[0]
    server_figure = all(r["verdict"]["server_figure"] for r in repeats)
    rung["verdict"] = {**rung["verdict"], "server_figure": server_figure, "ceiling": common}
    rung["repeats"] = [_without_summary(r) for r in repeats]
    return rung


def _without_summary(repeat: RungDoc) -> RungDoc:
    trimmed = copy.copy(repeat)
    trimmed.pop("k6_summary", None)  # k6's whole summary, once per rung file, is enough
    return trimmed


def estimate_doc(figure: Estimate) -> EstimateDoc:
    return EstimateDoc(median=figure.median, low=figure.low, high=figure.high, values=list(figure.values))
