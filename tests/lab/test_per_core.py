"""Per-core figures only where measured: the lab measures capacity at a budget, and the linearity example
found that capacity does not scale with the budget (Datasette at 250m, 500m and 1000m: 500, 600 and 800
req/s per core). So every figure "per core" that is not measured at a whole core is a projection: named so
in results.json (`projected_rps_per_core`) and shown as one in every output and in every shipped ladder's
words."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tenk.lab.documents import Results
from tenk.lab.results.compare import compare_rows
from tenk.lab.results.derivations import with_judgements
from tenk.lab.results.html_report import html_report
from tenk.lab.results.markdown import markdown, md_table
from tests.lab.test_comparison_labels import document
from tests.lab.test_shipped_ladders import SHIPPED

PER_CORE = re.compile(r"per[ _]core", re.IGNORECASE)


def unprojected(text: str) -> list[str]:
    """Each mention of a per-core figure with no word of projection just before it, in context."""
    found = []
    for match in PER_CORE.finditer(text):
        before = text[max(0, match.start() - 60) : match.start()].lower()
        if "project" not in before:
            found.append(text[max(0, match.start() - 60) : match.end() + 20])
    return found


def projected_document() -> Results:
    results = document(3)
    rungs = [rung.model_copy(update={"projected_rps_per_core": 7142.9}) for rung in results.rungs]
    return with_judgements(results.model_copy(update={"rungs": rungs}))


def test_results_json_names_the_per_core_figure_a_projection() -> None:
    results = projected_document()
    assert '"projected_rps_per_core":7142.9' in results.model_dump_json()
    assert unprojected(results.model_dump_json()) == []


@pytest.mark.parametrize("output", ["report.md", "report.html", "tenk lab compare"])
def test_every_output_shows_a_per_core_figure_as_a_projection(output: str) -> None:
    results = projected_document()
    if output == "report.md":
        text = markdown(results)
    elif output == "report.html":
        text = html_report(results)
    else:
        text = md_table(compare_rows(results, results))
    if output != "tenk lab compare":
        assert "7,143 (projection)" in text
    assert unprojected(text) == []


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_no_shipped_ladder_states_a_per_core_figure_it_did_not_measure(path: Path) -> None:
    ladder = tomllib.loads(path.read_text())
    words = [ladder.get("description", ""), *(claim["text"] for claim in ladder.get("claim", []))]
    assert unprojected(" ".join(" ".join(words).split())) == []
