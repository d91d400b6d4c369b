"""One label per comparison: every output of one results document (report.md, report.html, results.json,
the live view and `tenk lab compare`) gives each comparison the label `derivations.judgements` gave it.

The document holds the cases that used to read two ways (issue 49): one repeat a side ("inconclusive, one
run a side" in the verdict, "no detectable change (1.000x, 95 % CI 1.000–1.000)" in the claims table), a
pair with a rung that is not the target's ("-28.6 % (no detectable change)" in the rung table,
"inconclusive" in the verdict), and a light fixed-rate rung against a capacity ("goodput +4285 %
(better)" in the verdict, "invalid comparison" in the rung table); then a clear loss, no change, and a
search that did not converge, at one, three and five repeats a rung.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tenk.lab.definition.ladder import Ladder, Rung, RungConfig
from tenk.lab.documents import (
    Bottleneck,
    CapacityResult,
    Claim,
    Judgement,
    Results,
    RungResult,
    Verdict,
)
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.progress import QuietProgress
from tenk.lab.measuring.runner import LadderRun
from tenk.lab.results.compare import compare_rows
from tenk.lab.results.derivations import with_judgements
from tenk.lab.results.html_report import html_report
from tenk.lab.results.markdown import markdown
from tenk.lab.results.record import live_verdict
from tenk.lab.results.summary import summarise_rung
from tests.lab.test_compare import figures, rung

# (label, mode, headline by repeat, target CPU ms by repeat, what set its ceiling)
RUNGS = [
    ("light, no budget", "rate", [100.0, 100, 100, 100, 100], [1.49, 1.50, 1.48, 1.51, 1.49], "none"),
    ("budgeted", "capacity", [3000.0, 3100, 2950, 3050, 3020], [0.14, 0.141, 0.139, 0.142, 0.14], "target"),
    ("two workers", "capacity", [2100.0, 2150, 2080, 2120, 2140], [0.2, 0.21, 0.19, 0.2, 0.205], "target"),
    ("granian", "capacity", [2110.0, 2140, 2090, 2130, 2100], [0.2, 0.2, 0.21, 0.19, 0.205], "target"),
    ("k6 limited", "capacity", [2800.0, 2850, 2790, 2820, 2830], [0.15, 0.15, 0.151, 0.149, 0.15], "k6"),
    ("unconverged", "capacity", [4000.0, 4000, 4000, 4000, 4000], [0.12, 0.121, 0.119, 0.12, 0.12], "unconverged"),
]
CLAIMS = [
    Claim(text="a second worker is worth 1.16x", source="001", from_rung="budgeted", to_rung="two workers",
          metric="capacity", claimed_ratio=1.16),
    Claim(text="granian costs less CPU a request", source="-", from_rung="two workers", to_rung="granian",
          metric="cpu_ms", claimed_ratio=1.1),
    Claim(text="more than k6 can offer", source="-", from_rung="k6 limited", to_rung="unconverged",
          metric="capacity", claimed_ratio=1.4),
]  # fmt: skip


def one_repeat(index: int, label: str, mode: str, value: float, cpu_ms: float, bound: str) -> RungResult:
    base = rung(index, label, figures(1000, 0, value, 20.0))
    base.server.cpu_cores_mean = cpu_ms * value / 1000
    bottleneck = {
        "none": Bottleneck(kind="none", name=""),
        "target": Bottleneck(kind="target", name="target", cpus=[0]),
        "k6": Bottleneck(kind="generator", name="k6", detail="k6 used 85% of its cores"),
        "unconverged": Bottleneck(kind="unconverged", name="", detail="ran out of its 6 steps"),
    }[bound]
    search = None
    if bound == "unconverged":
        search = CapacityResult(
            capacity=value, converged=False, limited_by=[], generator_limited=False, plan="-", elapsed_s=30,
            stopped="ran out of its 6 steps: last pass 4,000 req/s, lowest failure 8,000",
        )  # fmt: skip
    return base.model_copy(
        update={
            "mode": mode, "value": value, "cpu_ms": {"target": cpu_ms}, "bottleneck": bottleneck, "capacity": search,
            "changed": "baseline" if index == 0 else f"step {index}",
            "verdict": Verdict(server_figure=bound in ("none", "target"), generator_bound=bound == "k6",
                               slo_met=True, notes=[], ceiling=bottleneck.phrase()),
        }
    )  # fmt: skip


def measured(repeats: int) -> dict[int, list[RungResult]]:
    return {
        index: [
            one_repeat(index, label, mode, values[k], cpu[k], bound).model_copy(update={"repeat": k + 1})
            for k in range(repeats)
        ]
        for index, (label, mode, values, cpu, bound) in enumerate(RUNGS)
    }


def document(repeats: int) -> Results:
    rungs = [summarise_rung(repeated) for repeated in measured(repeats).values()]
    return with_judgements(Results(ladder="labels", created="now", repeats=repeats, claims=CLAIMS, rungs=rungs))


def table_rows(text: str) -> list[dict[str, str]]:
    """report.md's tables as rows of cells by header (the rung table and the claims table)."""
    rows: list[dict[str, str]] = []
    head: list[str] = []
    for line in text.splitlines():
        if line.startswith("|---"):
            continue
        if not line.startswith("| "):
            head = []
            continue
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if not head:
            head = cells
        else:
            rows.append(dict(zip(head, cells, strict=True)))
    return rows


def html_rows(page: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for table in re.findall(r"<table>(.*?)</table>", page, re.S):
        head = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", table)]
        for row in re.findall(r"<tr>((?:<td>.*?</td>)+)</tr>", table):
            rows.append(dict(zip(head, [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)], strict=True)))
    return rows


def md_details(text: str) -> dict[str, dict[str, str]]:
    """report.md's details of each rung, by the rung's label: its figures by name."""
    found: dict[str, dict[str, str]] = {}
    for title, body in re.findall(r"<details><summary>(.*?)</summary>(.*?)</details>", text, re.S):
        label = html.unescape(title).split(". ", 1)[1]
        found[label] = dict(re.findall(r"^- \*\*(.+?)\*\*: (.*)$", body, re.M))
    return found


def html_details(page: str) -> dict[str, dict[str, str]]:
    """report.html's details of each rung, by the rung's label: its figures by name."""
    found: dict[str, dict[str, str]] = {}
    for title, body in re.findall(r"<details><summary>(.*?)</summary>(.*?)</details>", page, re.S):
        label = html.unescape(title).split(". ", 1)[1]
        pairs = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", body)
        found[label] = {html.unescape(name): html.unescape(value) for name, value in pairs}
    return found


def live_notes(repeats: int) -> list[str]:
    """What the live view says after the last repeat of each rung, as `tenk lab run` calls it."""
    by_index = measured(repeats)
    config = RungConfig()
    rungs = tuple(
        Rung(index=i, label=label, config=config, changes=(), allow_multi=False, line=None)
        for i, (label, *_) in enumerate(RUNGS)
    )
    ladder = Ladder("labels", "-", Path("labels.toml"), config, rungs, tuple(CLAIMS), {}, repeats)
    progress = QuietProgress()
    run = LadderRun(ladder, RunOptions(results_root=Path("results"), progress=progress), Path("."), "now", repeats,
                    0.0, {})  # fmt: skip
    run.measured = {index: [] for index in by_index}
    for k in range(repeats):
        for index, repeated in by_index.items():
            run.measured[index].append(repeated[k])
            live_verdict(run, index)
    return progress.notes[-(len(RUNGS) - 1) :]


def step_of(comparisons: list[Judgement], new: str) -> Judgement:
    return next(j for j in comparisons if j.new == new and not j.claim)


@pytest.mark.parametrize("repeats", [1, 3, 5])
def test_every_output_gives_each_comparison_the_label_results_json_gives_it(repeats: int) -> None:
    results = document(repeats)
    stored = [Judgement.model_validate(j) for j in json.loads(results.model_dump_json())["comparisons"]]
    assert stored == results.comparisons
    text, page = markdown(results), html_report(results)
    verdict = text[text.index("## Verdict") : text.index("## Rungs")]
    page_verdict = html.unescape(re.sub(r"</?b>", "", page[page.index("<h2>Verdict</h2>") : page.index("<h2>Charts")]))
    md_rows, page_rows = table_rows(text), html_rows(page)
    notes = live_notes(repeats)
    compared = {row["rung"]: row for row in compare_rows(results, results)}
    for judgement in stored:
        shown = judgement.comparison.shown
        if judgement.claim:
            for rows in (md_rows, page_rows):
                [row] = [row for row in rows if row.get("claim") == judgement.claim]
                assert row["comparison"] == shown
                assert row["verdict"] == judgement.verdict
            short = judgement.claim[:30]
            [line] = [line for line in verdict.splitlines() if short in line]
            assert f": {shown}" in line, line
            assert judgement.verdict in line, line
            continue
        pair = f"{judgement.new} vs {judgement.base}"
        [line] = [line for line in verdict.splitlines() if line.startswith(f"- **{judgement.new}** vs")]
        [item] = [item for item in re.findall(r"<li>(.*?)</li>", page_verdict, re.S) if item.startswith(pair)]
        [note] = [note for note in notes if f": {pair} (" in note]
        for where, shown_line in (("report.md", line), ("report.html", item), ("live view", note)):
            head = shown_line.split("; CPU ms/request")[0]
            assert head.endswith(f": {shown}"), (where, shown_line)
        for details in (md_details(text), html_details(page)):
            delta = details[judgement.new]["delta vs prev"]
            assert delta.endswith(shown), delta
        assert compared[judgement.new]["A step"].endswith(shown)
        assert compared[judgement.new]["B step"].endswith(shown)
        cpu = judgement.cpu
        assert cpu is not None
        assert compared[judgement.new]["A cpu step"].endswith(cpu.shown)
        assert f"CPU ms/request {line.split('CPU ms/request ')[1]}".endswith(cpu.shown), line
    for output in (text, page, *notes, json.dumps(list(compared.values()))):
        assert "1.000–1.000" not in output, "no interval from one repeat a side"
        assert "invalid comparison" not in output
        if repeats < 5:
            # The legend under the verdict says what the label means; no comparison may carry it.
            labels = output.replace("*no detectable change*, a rank test that could", "")
            assert "no detectable change" not in labels, "too few repeats to say so"


def test_the_known_contradictions_now_read_one_way() -> None:
    one, three, five = document(1), document(3), document(5)
    # One repeat a side: inconclusive with its n, in the verdict and the claims table alike.
    claimed = next(j for j in one.comparisons if j.claim == CLAIMS[0].text)
    assert claimed.comparison.shown == "inconclusive (n = 1 + 1: too few repeats to tell)"
    assert claimed.comparison.low is None
    # A fixed-rate goodput against a capacity is no comparison, whatever the repeats.
    for results in (one, five):
        light = step_of(results.comparisons, "budgeted").comparison
        assert light.shown == "inconclusive (a capacity against a fixed rate's goodput: not the same measure)"
    # Three a side cannot tell; five can.
    assert step_of(three.comparisons, "two workers").comparison.shown == (
        "inconclusive (n = 3 + 3: too few repeats to tell)"
    )
    assert step_of(five.comparisons, "two workers").comparison.label == "worse"
    assert step_of(five.comparisons, "granian").comparison.label == "no detectable change"
    # Not the target's, converged or not: inconclusive, and why.
    assert step_of(five.comparisons, "k6 limited").comparison.shown == (
        "inconclusive (k6 limited k6-bound, not the target)"
    )
    assert step_of(five.comparisons, "unconverged").comparison.reason.startswith(
        "k6 limited k6-bound, not the target; unconverged search did not converge in 5 of 5 repeats"
    )
