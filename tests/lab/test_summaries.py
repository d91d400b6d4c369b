"""A generator's summary file: read into the fields tenk uses, kept whole as it was written, and
refused with the file and the field named when it is damaged."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tenk.lab.cli import PRESET_DIR
from tenk.lab.definition.mixes import load_mix
from tenk.lab.documents import RungResult, load_results
from tenk.lab.driving.k6 import K6Summary, figures_from_summary
from tenk.lab.driving.k6_summaries import load_summary
from tenk.lab.driving.wrk import WrkSummary
from tenk.lab.errors import LabError, MalformedFileError

# Real runs' results.json at 95ede7a (tests/lab/test_documents.py), each rung with k6's summary kept whole.
RUNNER_RESULTS = Path(__file__).parent / "data" / "runner-95ede7a"
SUMMARY_FIGURES = [
    "offered_rps", "duration_s", "requests", "rps", "p50_ms", "p95_ms", "p99_ms", "max_ms", "errors",
    "error_rate", "dropped", "errors_by_reason", "endpoints",
]  # fmt: skip
WRK_SUMMARY = {
    "requests": 1200, "duration_us": 2001234, "unexpected": 3, "connect": 1, "read": 0, "write": 0,
    "timeout": 2, "p50_us": 812, "p95_us": 2100, "p99_us": 4400, "max_us": 9120, "by_status": {"503": 3},
}  # fmt: skip


def kept_rungs() -> list[RungResult]:
    return [rung for run in ("slow-upstream", "ingest") for rung in load_results(RUNNER_RESULTS / run).rungs]


def stored_summary() -> dict[str, Any]:
    summary = kept_rungs()[0].k6_summary
    assert summary
    copied: dict[str, Any] = json.loads(json.dumps(summary))
    return copied


@pytest.mark.parametrize("rung", kept_rungs(), ids=lambda rung: rung.label)
def test_a_kept_k6_summary_reads_back_to_the_figures_the_runner_recorded_from_it(rung: RungResult) -> None:
    text = json.dumps(rung.k6_summary)
    summary = K6Summary.from_json(text, "results.json")
    mix = load_mix(rung.config["mix"], relative_to=PRESET_DIR)
    config = rung.config
    figures = figures_from_summary(summary, mix, config["rate"], config["duration_s"], config["slo_p99_ms"])
    read, recorded = (f.model_dump(include=set(SUMMARY_FIGURES)) for f in (figures, rung.figures))
    # Results recorded before an endpoint's figures had its mean latency and VU pool read back with them.
    for name, endpoint in recorded["endpoints"].items():
        for field in ("mean_ms", "vu_pool_ms"):
            if not endpoint[field]:
                read["endpoints"][name][field] = 0.0
    assert read == recorded
    # Kept as k6 wrote it: every key, in k6's order, and counts still integers.
    assert json.dumps(summary.as_written()) == text


def test_a_truncated_k6_summary_names_the_file_and_where_it_stops(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    text = json.dumps(stored_summary())
    path.write_text(text[: len(text) // 2])
    with pytest.raises(MalformedFileError, match=r"summary\.json: not a k6 summary: Invalid JSON: EOF while parsing"):
        load_summary(path)


def without(path: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    def change(summary: dict[str, Any]) -> None:
        for key in path[:-1]:
            summary = summary[key]
        del summary[path[-1]]

    return change


def replacing(path: tuple[str, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def change(summary: dict[str, Any]) -> None:
        for key in path[:-1]:
            summary = summary[key]
        summary[path[-1]] = value

    return change


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        pytest.param(without(("metrics",)), "metrics: Field required", id="no metrics"),
        pytest.param(
            without(("metrics", "http_reqs", "values")), r"metrics\.http_reqs\.values: Field required", id="no values"
        ),
        pytest.param(
            replacing(("metrics", "http_req_duration", "values", "p(99)"), "slow"),
            r"metrics\.http_req_duration\.values\.p\(99\): Input should be a valid number",
            id="a value not a number",
        ),
        pytest.param(
            replacing(("state", "testRunDurationMs"), "soon"),
            r"state\.testRunDurationMs: Input should be a valid number",
            id="a run length not a number",
        ),
    ],
)
def test_a_k6_summary_missing_or_mangling_a_field_tenk_reads_names_the_file_and_field(
    tmp_path: Path, damage: Callable[[dict[str, Any]], None], field: str
) -> None:
    summary = stored_summary()
    damage(summary)
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    with pytest.raises(MalformedFileError, match=rf"{tmp_path}/summary\.json: not a k6 summary: {field}"):
        K6Summary.from_json(path.read_text(), path)


def test_a_runner_log_gives_the_summary_on_its_last_line(tmp_path: Path) -> None:
    summary = json.dumps(stored_summary())
    log = tmp_path / "runner.log"
    log.write_text(f'time=... level=info msg=starting\n{{"note": "not the summary"}}\n{summary}\n')
    assert json.dumps(load_summary(log).as_written()) == summary
    log.write_text("time=... level=info msg=starting\n")
    with pytest.raises(LabError, match=r"runner\.log: no k6 summary JSON in it"):
        load_summary(log)


def test_a_wrk_summary_reads_every_field_the_script_writes_and_keeps_them_as_written() -> None:
    text = json.dumps(WRK_SUMMARY)
    summary = WrkSummary.from_json(text, "wrk-summary.json")
    assert (summary.requests, summary.timeout, summary.by_status) == (1200, 2, {"503": 3})
    assert json.dumps(summary.as_written()) == text


def test_a_wrk_summary_missing_a_count_names_the_file_and_field() -> None:
    damaged = {key: value for key, value in WRK_SUMMARY.items() if key != "timeout"}
    with pytest.raises(MalformedFileError, match=r"wrk-summary\.json: not a wrk summary: timeout: Field required"):
        WrkSummary.from_json(json.dumps(damaged), "wrk-summary.json")
