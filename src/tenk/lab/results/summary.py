"""One rung's repeats folded into its headline: the median with a 95 % interval, and the ceiling.

Input: the per-repeat rung results the runner writes (each a full rung document). Output: the
rung document of the median repeat (so its figures, server sample and capacity steps are real
measurements, not averages), with `value` set to the median and beside it `estimate`,
`cpu_ms_estimate`, `repeats` and `bottlenecks`.
"""

from __future__ import annotations

from collections import Counter

from tenk.lab.documents import RungResult
from tenk.lab.results.stats import estimate


def summarise_rung(repeats: list[RungResult]) -> RungResult:
    if not repeats:
        raise ValueError("a rung needs at least one repeat")
    values = [r.value for r in repeats]
    order = sorted(range(len(repeats)), key=lambda i: values[i])
    median_repeat = repeats[order[(len(order) - 1) // 2]]
    headline = estimate(values)
    cpu = [r.cpu_ms["target"] for r in repeats if r.cpu_ms.get("target")]
    phrases = [r.verdict.ceiling for r in repeats]
    # The ceiling most repeats agree on; a split is itself worth reading, so all are kept above.
    common = Counter(phrases).most_common(1)[0][0]
    named = [r.bottleneck for r in repeats if r.bottleneck is not None and r.verdict.ceiling == common]
    server_figure = all(r.verdict.server_figure for r in repeats)
    return median_repeat.model_copy(
        deep=True,
        update={
            "repeat": None,
            "value": headline.median,
            "estimate": headline,
            "cpu_ms_estimate": estimate(cpu) if cpu else None,
            "bottlenecks": phrases,
            "bottleneck": named[0] if named else median_repeat.bottleneck,
            "verdict": median_repeat.verdict.model_copy(update={"server_figure": server_figure, "ceiling": common}),
            # k6's whole summary, once per rung file, is enough
            "repeats": [r.model_copy(update={"k6_summary": None}) for r in repeats],
        },
    )
