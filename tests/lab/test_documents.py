"""results.json as the runner writes it: every map in it typed, and what it wrote before loads unchanged."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from tenk.lab.definition.ladder import RungConfig
from tenk.lab.documents import RungSettings, Second, load_results
from tenk.lab.results.markdown import markdown

# Two `tenk lab run`s of the smoke-sized presets (tests/lab/test_presets.py) at 95ede7a, the commit
# before these maps were typed, kept whole: results.json and the report.md written beside it.
RUNNER_RESULTS = Path(__file__).parent / "data" / "runner-95ede7a"
RUNS = ["slow-upstream", "ingest"]


@pytest.mark.parametrize("run", RUNS)
def test_a_results_file_the_runner_wrote_before_the_types_loads_and_dumps_with_every_value(run: str) -> None:
    folder = RUNNER_RESULTS / run
    written = json.loads((folder / "results.json").read_text())
    # Fields added since (cluster rungs' per-node CPU) are absent from the file and left out here.
    assert json.loads(load_results(folder).model_dump_json(exclude_unset=True)) == written


@pytest.mark.parametrize("run", RUNS)
def test_its_report_reads_as_the_runner_wrote_it(run: str) -> None:
    folder = RUNNER_RESULTS / run
    assert markdown(load_results(folder)) == (folder / "report.md").read_text()


def test_what_a_step_recorded_beside_its_figures_reads_as_typed_values() -> None:
    upstream_run = load_results(RUNNER_RESULTS / "slow-upstream")
    tenk = upstream_run.rungs[-1]
    assert (tenk.server.upstream.get("max_in_flight") or 0) >= 1
    inflight = [gauge for key, gauge in tenk.server.gauges.items() if key.startswith("tenk_upstream_inflight")]
    assert inflight
    assert all(gauge["max"] >= gauge["last"] for gauge in inflight)
    assert all(isinstance(second, Second) for second in tenk.figures.seconds)
    assert tenk.server.series[-1]["cpu_cores"] >= 0
    assert tenk.config.get("mix") == "mixes/slow-quotes.toml"
    machine = upstream_run.provenance["machine"]
    assert (machine["cores"] or 0) >= 1
    ingest_run = load_results(RUNNER_RESULTS / "ingest")
    landed = [rung.server.ingest for rung in ingest_run.rungs]
    assert all(ingest.get("rows_landed", 0) > 0 for ingest in landed)
    assert any("backlog_start" in ingest for ingest in landed), "tenk's rungs record the backlog"
    assert not any(ingest.get("backlog_grew") for ingest in landed)


def test_the_config_a_results_file_records_names_every_field_of_a_rung_config() -> None:
    # A RungConfig field missing from RungSettings would be dropped when a results.json is loaded.
    assert RungSettings.__optional_keys__ == {field.name for field in fields(RungConfig)}
