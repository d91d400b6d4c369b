"""docs/results/ as data (`tools.results_record`): every file there is a run's, and a page's figure is its data's.

Each test builds a small results folder of its own, from copies of committed data files, and reads it as
`make docs` reads docs/results/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from benchmarks.gate_campaign import Campaign, Trial, save

from tools import docs_pages
from tools.results_record import RESULTS, RecordError, build

HEADLINE = RESULTS / "2026-11-30" / "headline-57cd191"
PROBE = RESULTS / "2026-11-30" / "reads-12fb041" / "probe.txt"


def _day(tmp_path: Path, measured: str, files: dict[str, Path]) -> Path:
    """docs/results/2026-11-30/ in a tmp docs folder: `files` (name -> committed file) and its measured.toml."""
    day = tmp_path / "docs" / "results" / "2026-11-30"
    for name, source in files.items():
        (day / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, day / name)
    day.mkdir(parents=True, exist_ok=True)
    (day / "measured.toml").write_text(measured)
    return day.parent


_PROBE_RUN = """
[[run]]
id = "probe"
kind = "reads"
title = "The probe"
files = ["reads/probe.txt"]
command = "python -m benchmarks.bench_reads --probe --rounds 3"
commit = "12fb041"
"""


def test_a_file_that_no_run_names_is_refused(tmp_path: Path) -> None:
    root = _day(tmp_path, _PROBE_RUN, {"reads/probe.txt": PROBE, "reads/other.json": HEADLINE / "new-1.json"})
    with pytest.raises(RecordError, match=r"reads/other\.json: no run in 2026-11-30/measured\.toml names it"):
        build(root)


def test_a_run_whose_files_are_not_there_is_refused(tmp_path: Path) -> None:
    root = _day(tmp_path, _PROBE_RUN.replace("reads/probe.txt", "reads/gone.txt"), {"reads/probe.txt": PROBE})
    with pytest.raises(RecordError, match=r"'reads/gone\.txt' matches no file"):
        build(root)


def test_a_key_measured_toml_does_not_know_is_refused(tmp_path: Path) -> None:
    root = _day(tmp_path, _PROBE_RUN + 'comand = "a typo"\n', {"reads/probe.txt": PROBE})
    with pytest.raises(RecordError, match="comand"):
        build(root)


def test_a_bench_transcript_gives_its_cases_and_its_ratios(tmp_path: Path) -> None:
    record = build(_day(tmp_path, _PROBE_RUN, {"reads/probe.txt": PROBE}))
    hit = record.row("2026-11-30-reads-probe-get-products-id-in-process-hit").fields
    # The bench's own table (the median), then the rounds from its "round N" lines.
    assert hit["req/s"] == "33,332 (27,502, 34,467, 33,332)"
    assert hit["API µs a request"] == "29"
    ratio = record.row("2026-11-30-reads-probe-get-products-id-in-process-hit-hello-world-bare-asgi").fields
    assert ratio["median (rounds)"] == "0.76 (0.60, 0.76, 0.78)"
    assert ratio["command"] == "`python -m benchmarks.bench_reads --probe --rounds 3`"


def test_a_transcript_beside_its_json_is_linked_with_it(tmp_path: Path) -> None:
    committed = RESULTS / "2026-11-30" / "reads-147b65c"
    run = _PROBE_RUN.replace("reads/probe.txt", "reads/probe.json")
    root = _day(
        tmp_path, run, {"reads/probe.json": committed / "probe.json", "reads/probe.txt": committed / "probe.txt"}
    )
    data = build(root).row("2026-11-30-reads-probe-hello-world-bare-asgi").fields["data"]
    assert "(results/2026-11-30/reads/probe.json)" in data
    assert "[transcript](results/2026-11-30/reads/probe.txt)" in data


def test_the_headline_is_the_newest_run_of_the_checkouts_own_code(tmp_path: Path) -> None:
    # old-2 ran last, but on the code before: the headline is new-2's, at its budget.
    measured = """
[[run]]
id = "headline"
kind = "headline"
title = "The realistic mix"
files = ["headline/new-2.json"]
command = "tenk lab run src/tenk/lab/examples/headline.toml"

[[run.part]]
files = ["headline/old-2.json"]
label = "before"
code = "b1a5f54"
"""
    files = {"headline/new-2.json": HEADLINE / "new-2.json", "headline/old-2.json": HEADLINE / "old-2.json"}
    headline = docs_pages.headline(build(_day(tmp_path, measured, files)), "docs/")
    assert "**3,200 requests per second** at p99 under 100 ms" in headline
    assert "500m of CPU (half a core)" in headline
    assert "at 0.136 API CPU ms a request" in headline
    assert "57cd191" in headline
    assert "(docs/results/2026-11-30/headline/new-2.json)" in headline


def test_a_page_quoting_a_figure_gets_its_data_figure(tmp_path: Path) -> None:
    record = build(_day(tmp_path, _PROBE_RUN, {"reads/probe.txt": PROBE}))
    anchor = "2026-11-30-reads-probe-get-products-id-in-process-hit"
    rps, p99 = f"<!-- figure {anchor}: req/s -->", f"<!-- figure {anchor}: p99 ms -->"
    page = f"The hit served {rps}35,000<!-- /figure --> req/s, p99 {p99}3<!-- /figure --> ms."
    wanted = f"The hit served {rps}33,332<!-- /figure --> req/s, p99 {p99}3.85<!-- /figure --> ms."
    assert docs_pages.fill_figures(page, record, "page.md") == wanted


def test_a_page_quoting_a_row_the_results_have_not_is_refused(tmp_path: Path) -> None:
    record = build(_day(tmp_path, _PROBE_RUN, {"reads/probe.txt": PROBE}))
    with pytest.raises(RecordError, match=r"page\.md quotes row '2026-11-30-reads-gone'"):
        docs_pages.fill_figures("<!-- figure 2026-11-30-reads-gone: req/s -->1<!-- /figure -->", record, "page.md")


def test_a_gate_campaign_gives_a_row_a_setting_on_the_results_page(tmp_path: Path) -> None:
    campaign = Campaign("budget", {"ci": {"rounds": 1}}, commit="abc1234")
    campaign.trials += [
        Trial("ci", planted, verdict, 0.01, 40.0, "2026-11-30T00:00:00Z", 1.0)
        for planted, verdict in [(0.0, "pass"), (0.0, "pass"), (0.1, "fail"), (0.1, "pass")]
    ]
    source = tmp_path / "gate-budget.json"
    save(source, campaign)
    measured = """
[[run]]
id = "gate-budget"
kind = "gates"
title = "The budget gate"
files = ["gate-budget.json"]
command = "make gate-campaign BENCH_ARGS='--gate budget'"
"""
    record = build(_day(tmp_path, measured, {"gate-budget.json": source}))
    row = record.row("2026-11-30-gate-budget-ci").fields
    assert row["gate"] == "budget"
    assert row["false alarms (A/A)"] == "0/2 = 0% [0%, 66%]"
    assert row["10% caught"] == "1/2 = 50% [9%, 91%]"
    assert row["commit"] == "abc1234"
    page = docs_pages.results_page(record)
    assert "## The CI gates: how often they cry wolf" in page
    assert "| budget | ci (rounds 1) | 0/2 = 0% [0%, 66%] |" in page
