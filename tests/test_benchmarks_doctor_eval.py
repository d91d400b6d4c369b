"""The doctor evaluation's data and matching (benchmarks/doctor_eval): the labels a reader checks must be
well formed, and a finding must count against the label at its place and rule, nowhere else. The apps
themselves are not fetched here: that is `make doctor-eval`."""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path

import pytest
from benchmarks.doctor_eval.apps import LABELS, SETS, load_apps, load_set
from benchmarks.doctor_eval.labels import (
    JUDGMENTS,
    VERDICTS,
    Finding,
    Label,
    doctor_match,
    load_labels,
    write_jsonl,
)
from benchmarks.doctor_eval.markdown import markers, write_docs
from benchmarks.doctor_eval.score import _stored, draw
from benchmarks.doctor_eval.tools import parse_ty_async

from tenk.doctor._rules import RULES

APPS = load_apps()
HELD_OUT = load_set("heldout")
HELD_OUT_2 = load_set("heldout2")
HELD_OUT_3 = load_set("heldout3")
HELD_OUT_4 = load_set("heldout4")
HOP = re.compile(r"^[\w./-]+\.py:\d+ ")


def _label(line: int, end_line: int, category: str = "blocking-call") -> Label:
    return Label("x-01", "TP", category, "pkg/mod.py", line, end_line, "open()", ("pkg/mod.py:1 route",), "why")


def _finding(rule: str, path: str, line: int) -> Finding:
    return Finding("doctor", rule, path, line, "open(p)", "blocks")


def test_every_app_is_pinned_by_artifact_and_digest() -> None:
    assert len(APPS) >= 8
    assert len(HELD_OUT) >= 6
    assert len(HELD_OUT_2) >= 3
    assert len(HELD_OUT_3) >= 3
    assert len(HELD_OUT_4) >= 2
    for app in [*APPS, *HELD_OUT, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4]:
        assert re.fullmatch(r"[0-9a-f]{64}", app.sha256), app.name
        assert app.version in app.file.replace("_", "-") or app.version in app.file, app.name


@pytest.mark.parametrize("app", [a.name for a in [*APPS, *HELD_OUT, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4]])
def test_every_label_names_a_doctor_rule_and_a_chain_of_file_and_line_hops(app: str) -> None:
    labels = load_labels(app)
    assert labels, f"no labels for {app}"
    for label in labels:
        assert label.category in RULES, f"{label.id}: {label.category} is no doctor rule"
        assert not label.file.startswith("/"), label.id
        assert label.end_line >= label.line, label.id
        assert label.chain, label.id
        assert all(HOP.match(hop) for hop in label.chain), f"{label.id}: a hop without file:line"
        assert label.why.strip(), label.id


def test_every_label_file_belongs_to_a_pinned_app() -> None:
    pinned = {a.name for a in [*APPS, *HELD_OUT, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4]}
    assert {p.stem for p in LABELS.glob("*.toml")} <= pinned


@pytest.mark.parametrize(("one", "other"), list(itertools.combinations(sorted(SETS), 2)))
def test_no_two_sets_share_an_app_or_artifact(one: str, other: str) -> None:
    mine, theirs = load_set(one), load_set(other)
    assert {a.name for a in mine}.isdisjoint(a.name for a in theirs)
    assert {a.package or a.name for a in mine}.isdisjoint(a.package or a.name for a in theirs)
    assert {a.sha256 for a in mine}.isdisjoint(a.sha256 for a in theirs)


def test_app_is_fetched_by_its_distribution_name_when_that_differs() -> None:
    airflow = next(a for a in HELD_OUT if a.name == "airflow")
    assert airflow.requirement == "apache-airflow-core==3.3.2"
    assert APPS[0].requirement == f"{APPS[0].name}=={APPS[0].version}"


@pytest.mark.parametrize("app_set", sorted(SETS))
def test_each_set_writes_its_own_block_of_the_docs_page(app_set: str, tmp_path: Path) -> None:
    page = tmp_path / "doctor.md"
    blocks = {name: markers(name) for name in SETS}
    page.write_text("".join(f"intro {name}\n{begin}\nold\n{end}\n" for name, (begin, end) in blocks.items()))
    summary = {"run": "r", "commit": "c", "doctor_tree": "t", "date": "d", "sample": 40, "seed": 48, "ruff": "ruff"}
    write_docs({**summary, "ty_async": {"package": "ty-async"}, "apps": []}, page, app_set)
    text = page.read_text()
    for name, (begin, end) in blocks.items():
        inside = text[text.index(begin) : text.index(end)]
        assert ("old" in inside) == (name != app_set), name
        assert f"intro {name}" in text


def test_judgments_give_a_verdict_and_a_reason() -> None:
    for path in JUDGMENTS.glob("*.toml"):
        with path.open("rb") as f:
            for entry in tomllib.load(f)["finding"]:
                assert entry["verdict"] in VERDICTS, (path.name, entry["key"])
                assert entry["reason"].strip(), (path.name, entry["key"])


def test_doctor_finding_counts_for_the_label_within_its_span_and_rule_only() -> None:
    labels = [_label(10, 12)]
    assert doctor_match(_finding("blocking-call", "pkg/mod.py", 12), labels) is labels[0]
    assert doctor_match(_finding("blocking-call", "pkg/mod.py", 13), labels) is None
    assert doctor_match(_finding("blocking-call", "pkg/other.py", 10), labels) is None
    assert doctor_match(_finding("no-timeout", "pkg/mod.py", 10), labels) is None


def test_ty_async_transitive_finding_is_kept_at_the_sink_it_names() -> None:
    output = (
        "pkg/routes.py:40:9: ASYNC200T blocking sync call time.sleep reachable from async function via helper "
        "(pkg/helpers.py:7:5)\n"
        "pkg/routes.py:50:9: ASYNC200 User-configured blocking sync call open in async function, consider x().\n"
    )
    transitive, direct = parse_ty_async(output)
    assert (transitive.path, transitive.line) == ("pkg/helpers.py", 7)
    assert transitive.chain == ("pkg/routes.py:40 (the call in the async function)",)
    assert (direct.path, direct.line, direct.chain) == ("pkg/routes.py", 50, ())


def test_precision_draw_is_seeded_per_app_and_keeps_doctor_order() -> None:
    findings = [_finding("blocking-call", "pkg/mod.py", n) for n in range(100)]
    first = draw(APPS[0], findings, 40, seed=48)
    assert first == draw(APPS[0], findings, 40, seed=48)
    assert first != draw(APPS[1], findings, 40, seed=48)
    assert [f.line for f in first] == sorted(f.line for f in first)
    assert len(first) == 40
    assert draw(APPS[0], findings[:5], 40, seed=48) == findings[:5]


def test_doctors_notes_are_kept_apart_from_the_findings_drawn_and_credited(tmp_path: Path) -> None:
    warning = _finding("no-timeout", "pkg/routes.py", 3)
    note = Finding("doctor", "no-timeout", "pkg/cli.py", 9, "requests.get(u)", "advice", severity="note")
    write_jsonl(tmp_path / "findings" / f"{APPS[0].name}.doctor-directory.jsonl", [warning, note])
    assert _stored(tmp_path, APPS[0], "doctor-directory") == [warning]
    assert _stored(tmp_path, APPS[0], "doctor-directory", notes=True) == [note]
