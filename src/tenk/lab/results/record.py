"""What `tenk lab run` writes down once its ladder is measured: each rung's summary (`rung-NN.json`),
`results.json` and the reports. `run_ladder` is the whole run: measure (`measuring.runner`), then write.
While it measures, the live view says after each repeat how its rung compares with the one before it, on
the repeats so far, with the label the reports give the same figures (`live_verdict`).

A run that stops early (an error, Ctrl-C) still writes what finished, marked partial, and never masks why
it stopped.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from tenk.lab.definition.ladder import Ladder
from tenk.lab.documents import Results
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.runner import LadderRun, begin_run, measure_ladder
from tenk.lab.results.derivations import judge_step, with_judgements
from tenk.lab.results.profiles import with_profiles
from tenk.lab.results.provenance import provenance
from tenk.lab.results.summary import summarise_rung
from tenk.lab.results.verdict import step_line

logger = logging.getLogger("tenk.lab.runner")


def run_ladder(ladder: Ladder, options: RunOptions) -> Path:
    """Measure every rung of `ladder`, then write its results; returns the run's folder."""
    run = begin_run(ladder, options)
    run.on_measured = lambda index: live_verdict(run, index)
    try:
        measure_ladder(run)
    except BaseException:
        write_partial(run)
        raise
    return write_results(run)


def live_verdict(run: LadderRun, index: int) -> None:
    """Rung `index` against the rung before it, on every repeat of both measured so far, as a note: the
    line the verdict will print once the last repeats are in (the same judgement, on the same figures)."""
    rungs = run.ladder.rungs
    if index == 0 or not run.measured.get(index - 1) or not run.measured.get(index):
        return
    before, after = summarise_rung(run.measured[index - 1]), summarise_rung(run.measured[index])
    done = len(run.measured[index])
    line = step_line(judge_step(before, after), rungs[index].changed).replace("**", "")
    run.options.progress.note(f"after {done} of {run.repeats} repeat(s): {line}")


def write_results(run: LadderRun, partial: str = "") -> Path:
    """results.json and the reports, from every repeat measured (or, when `partial` says why the run
    stopped early, from those that finished)."""
    # Here, not at the top: the HTML report loads plotly, which `tenk lab run --dry-run` must not pay for.
    from tenk.lab.results.report import write_reports

    rungs = [summarise_rung(run.measured[r.index]) for r in run.ladder.rungs if run.measured.get(r.index)]
    with_profiles(rungs, run.out)
    for rung_result in rungs:
        (run.out / f"rung-{rung_result.index + 1:02d}.json").write_text(rung_result.model_dump_json(indent=2))
    results = Results(
        ladder=run.ladder.name,
        description=run.ladder.description,
        source=str(run.ladder.path),
        created=run.stamp,
        segment=run.options.segment,
        repeats=run.repeats,
        elapsed_s=round(time.monotonic() - run.started_at, 1),
        time_bound_s=round(run.bound_s),
        provenance=provenance(run.ladder, run.env, run.budget),
        claims=list(run.ladder.claims),
        rungs=rungs,
        partial=partial,
    )
    results = with_judgements(results)
    (run.out / "results.json").write_text(results.model_dump_json(indent=2))
    write_reports(results, run.out)
    return run.out


def write_partial(run: LadderRun) -> None:
    """After a run stopped early: what finished, marked partial. Never masks why it stopped."""
    done = sum(len(results) for results in run.measured.values())
    if not done:
        return
    partial = f"the run stopped after {done} of {run.repeats * len(run.ladder.rungs)} rung measurements"
    try:
        write_results(run, partial)
    except Exception:
        logger.exception("could not write the partial results to %s", run.out)
        return
    run.options.progress.note(f"partial results of what finished: {run.out / 'results.json'}")
