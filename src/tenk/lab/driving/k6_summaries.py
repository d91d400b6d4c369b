"""A k6 run the lab did not start, such as a k6-operator runner pod's or a plain `k6 run`'s: its summary,
read from a file or from the end of a log, as a one-rung result that `tenk lab merge --k6-summaries`
folds with the others."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tenk.lab.definition.mixes import Mix
from tenk.lab.documents import Metrics, Results, RungResult, ServerSample, Verdict
from tenk.lab.driving.k6 import K6Summary, figures_from_summary
from tenk.lab.errors import LabError, MalformedFileError


def result_from_summary(summary: K6Summary, mix: Mix, rate: float, duration_s: float) -> Results:
    """A one-rung result from a raw k6 summary, such as a k6-operator runner pod prints to stdout.

    The generator's cost is unknown there (it ran elsewhere), so it reads as zero.
    """
    figures = figures_from_summary(summary, mix, rate, duration_s)
    rung = RungResult(
        index=0, label=mix.name, changed="baseline", changes=[], multi_variable=False, allow_multi=False,
        config={"mix": mix.name, "rate": rate, "duration_s": duration_s, "slo_p99_ms": 100},
        mode="rate", value=figures.rps, figures=figures, server=ServerSample(), capacity=None,
        metrics=Metrics(scraped=False, delta={}), k6_summary=summary.as_written(),
        verdict=Verdict(server_figure=True, generator_bound=figures.dropped > 0, slo_met=True, notes=[]),
    )  # fmt: skip
    created = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Results(ladder=f"{mix.name}-k6", description="k6 summaries", created=created, claims=[], rungs=[rung])


def load_summary(path: Path) -> K6Summary:
    """A k6 summary JSON file, or a runner's log whose last JSON line is the summary."""
    text = path.read_text()
    first_failure: MalformedFileError | None = None
    for candidate in [text, *reversed(text.splitlines())]:
        candidate = candidate.strip()
        if candidate.startswith("{") and '"metrics"' in candidate:
            try:
                return K6Summary.from_json(candidate, path)
            except MalformedFileError as exc:
                # Named if nothing else parses: the whole file's failure, else its last summary-like line's.
                first_failure = first_failure or exc
    if first_failure is not None:
        raise first_failure
    raise LabError(f"{path}: no k6 summary JSON in it")
