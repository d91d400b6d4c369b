"""A qualitative claim is checked as inequalities between two rungs' measured quantities, parsed,
never evaluated: held, not held, or not measured when a quantity was not."""

from __future__ import annotations

import pytest

from tenk.lab.definition.expectations import HELD, NOT_HELD, NOT_MEASURED, ExpectationError, parse
from tenk.lab.documents import Claim, RungResult, ServerSample
from tenk.lab.results.derivations import check_expectations
from tenk.lab.results.tables import claim_rows
from tests.lab.test_compare import figures, result, rung

MEASURED = {
    ("from_rung", "goodput"): 0.2,
    ("to_rung", "goodput"): 39.0,
    ("from_rung", "upstream_in_flight_max"): 1.0,
    ("to_rung", "upstream_in_flight_max"): 210.0,
}


def lookup(rung: str, name: str) -> float | None:
    return MEASURED.get((rung, name))


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("from_rung.goodput <= 0.1 * to_rung.goodput", HELD),
        ("to_rung.upstream_in_flight_max >= 20 * from_rung.upstream_in_flight_max", HELD),
        ("to_rung.upstream_in_flight_max >= 1000", NOT_HELD),  # "thousands": not at 40 req/s
        ("from_rung.goodput > to_rung.goodput", NOT_HELD),
        ("to_rung.target_in_flight_max < 5", NOT_MEASURED),
    ],
)
def test_an_expectation_is_held_not_held_or_not_measured(text: str, held: str) -> None:
    assert parse(text).check(lookup)[0] == held


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true') > 1",
        "to_rung.goodput >= 1; import os",
        "to_rung.goodput.real >= 1",
        "other_rung.goodput >= 1",
        "to_rung.goodput == 1",
        "2 >= 1",
    ],
)
def test_anything_but_the_small_grammar_is_refused(text: str) -> None:
    with pytest.raises(ExpectationError):
        parse(text)


def _rung(label: str, rps: float, max_in_flight: int) -> RungResult:
    server = ServerSample(upstream={"in_flight": 0, "max_in_flight": max_in_flight})
    return rung(0, label, figures(int(rps * 10), 0, rps, 100.0)).model_copy(update={"server": server})


def test_the_report_checks_a_qualitative_claim_with_the_values_it_compared() -> None:
    claim = Claim(
        text="sync melts, async parks", source="001.txt", from_rung="sync", to_rung="async", metric="rps",
        claimed_ratio=None,
        expect=("from_rung.goodput <= 0.1 * to_rung.goodput",
                "to_rung.upstream_in_flight_max >= 20 * from_rung.upstream_in_flight_max"),
    )  # fmt: skip
    melted, parked = _rung("sync", 0.2, 1), _rung("async", 39.0, 210)
    held, lines = check_expectations(claim, melted, parked)
    assert held == HELD
    assert lines[1].endswith("held (210 >= 20)")
    # The same claim against rungs where sync kept up is not held.
    assert check_expectations(claim, _rung("sync", 39.0, 200), parked)[0] == NOT_HELD
    results = result([]).model_copy(update={"rungs": [melted, parked], "claims": [claim]})
    row = claim_rows(results)[0]
    assert row["claimed"] == "qualitative"
    assert row["expectation"].startswith("held: ")
