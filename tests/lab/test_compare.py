"""Merging segment results: counts and rates add up exactly, percentiles are estimates with bounds."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.stack import Stack
from tenk.cli import main
from tenk.lab.documents import (
    EndpointFigures,
    LoadFigures,
    Machine,
    Provenance,
    Results,
    RungResult,
    Software,
    Verdict,
    load_results,
)
from tenk.lab.driving import latency
from tenk.lab.driving.k6 import k6_binary, segment_args
from tenk.lab.errors import LabError
from tenk.lab.results.compare import compare_rows, merge_results
from tenk.lab.results.derivations import with_judgements
from tenk.lab.results.markdown import markdown
from tests.support.servers import ServerProcess


def figures(requests: int, errors: int, rps: float, p99: float, dropped: int = 0) -> LoadFigures:
    endpoint = EndpointFigures(
        requests=requests, share=1.0, expected_share=1.0, p50_ms=1.0, p99_ms=p99, error_rate=errors / requests
    )
    return LoadFigures(
        engine="k6", offered_rps=1000.0, duration_s=10.0, requests=requests, rps=rps, p50_ms=p99 / 4,
        p95_ms=p99 / 2, p99_ms=p99, max_ms=p99 * 2, errors=errors, error_rate=errors / requests, dropped=dropped,
        generator_cpu_s=1.0, generator_cores_used=0.1, generator_util=0.1, generator_cores=1,
        generator_bound=dropped > 0, endpoints={"a": endpoint},
    )  # fmt: skip


def rung(index: int, label: str, figures: LoadFigures) -> RungResult:
    """A fixed-rate rung that measured `figures`: a server figure, the SLO met."""
    return RungResult(
        index=index, label=label, changed="x", changes=[], multi_variable=False, mode="rate", value=figures.rps,
        figures=figures, config={"slo_p99_ms": 100},
        verdict=Verdict(server_figure=True, generator_bound=False, slo_met=True, notes=[]),
    )  # fmt: skip


def result(label_values: list[tuple[str, LoadFigures]], segment: str = "") -> Results:
    rungs = [rung(i, label, f) for i, (label, f) in enumerate(label_values)]
    return Results(ladder="l", created="now", segment=segment, claims=[], rungs=rungs)


def test_merged_counts_are_sums_and_percentiles_carry_bounds() -> None:
    a = result([("r", figures(5000, 5, 500.0, 20.0))], "1/2")
    b = result([("r", figures(3000, 9, 300.0, 40.0, dropped=2))], "2/2")
    merged = merge_results([a, b]).rungs[0].figures
    assert merged.requests == 8000
    assert merged.errors == 14
    assert merged.dropped == 2
    assert merged.rps == 800.0
    assert merged.error_rate == pytest.approx(14 / 8000)
    assert merged.max_ms == 80.0
    assert merged.p99_ms == pytest.approx((20 * 5000 + 40 * 3000) / 8000)
    assert merged.p99_bounds_ms == [20.0, 40.0]
    assert merged.generator_bound  # one segment dropped iterations: the whole run is flagged
    assert merged.endpoints["a"].requests == 8000


def test_a_merged_run_keeps_the_largest_generator_and_the_settings_all_segments_agree_on() -> None:
    a, b = figures(5000, 0, 500.0, 20.0), figures(3000, 0, 300.0, 40.0)
    a.generator_peak_rss_mb, b.generator_peak_rss_mb = 900.0, 3100.0
    a.generator_settings = b.generator_settings = {"GOGC": "off", "GOMEMLIMIT": "5856MiB"}
    merged = merge_results([result([("r", a)], "1/2"), result([("r", b)], "2/2")]).rungs[0].figures
    assert (merged.generator_peak_rss_mb, merged.generator_settings) == (3100.0, a.generator_settings)
    b.generator_settings = {"GOGC": "400"}
    merged = merge_results([result([("r", a)], "1/2"), result([("r", b)], "2/2")]).rungs[0].figures
    assert merged.generator_settings == {}


def test_segments_of_different_ladders_are_not_merged() -> None:
    a = result([("r", figures(10, 0, 1.0, 1.0))])
    b = a.model_copy(update={"ladder": "other"})
    with pytest.raises(LabError):
        merge_results([a, b])


def test_compare_gives_each_sides_step_with_the_label_its_own_report_gives_it() -> None:
    a = repeated([("on", [1000.0, 1010, 990, 1005, 995]), ("off", [500.0, 505, 495, 502, 498])])
    b = repeated([("on", [1100.0, 1110, 1090, 1105, 1095]), ("off", [605.0, 610, 600, 607, 603])])
    first, second = compare_rows(with_judgements(a), with_judgements(b))
    assert first["B vs A"].startswith("better: 1.100x")
    assert (first["A step"], first["B step"]) == ("-", "-")
    assert second["A step"] == "-50\u00a0% [-51, -49]: worse"
    assert second["B step"] == "-45\u00a0% [-46, -44]: worse"
    [a_step] = [j for j in with_judgements(a).comparisons if j.new == "off"]
    assert second["A step"].endswith(a_step.comparison.shown)


@pytest.mark.slow
def test_two_k6_segments_of_one_script_merge_to_the_whole_run(
    stack: Stack, spawn_api: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    # As on k6-operator: one generated script, each runner taking its own execution segment and
    # printing its summary to stdout; the merge recovers the exact total.
    api = spawn_api(stack)
    script = tmp_path / "ping.js"
    runner = CliRunner()
    assert (
        runner.invoke(main, ["lab", "script", "ping", "--rate", "100", "--duration", "2", "-o", str(script)]).exit_code
        == 0
    )
    logs = []
    for segment in ("1/2", "2/2"):
        log = tmp_path / f"runner-{segment[0]}.log"
        env = {**os.environ, "TENK_LAB_BASE_URL": api.base_url, "TENK_LAB_RUN_ID": f"seg{segment[0]}"}
        with log.open("w") as out:
            subprocess.run(
                [k6_binary(), "run", "--quiet", *segment_args(segment), str(script)],
                stdout=out, stderr=subprocess.DEVNULL, env=env, timeout=60, check=True,
            )  # fmt: skip
        logs.append(str(log))
    merged_dir = tmp_path / "merged"
    result = runner.invoke(
        main,
        [
            "lab",
            "merge",
            "--k6-summaries",
            "--mix",
            "ping",
            "--rate",
            "100",
            "--duration",
            "2",
            *logs,
            "-o",
            str(merged_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    merged = json.loads((merged_dir / "results.json").read_text())
    figures = merged["rungs"][0]["figures"]
    per_runner = [json.loads(Path(log).read_text().strip().splitlines()[-1]) for log in logs]
    counts = [summary["metrics"]["http_reqs"]["values"]["count"] for summary in per_runner]
    assert all(90 <= count <= 111 for count in counts)  # each runner made about half: 100 req/s for 2 s
    assert figures["requests"] == sum(counts)
    assert figures["errors"] == 0
    assert figures["rps"] == pytest.approx(100, abs=1)
    assert (merged_dir / "report.html").exists()


def repeated(label_values: list[tuple[str, list[float]]], provenance: Provenance | None = None) -> Results:
    """A result whose rungs each carry several repeats' goodput."""
    rungs = [
        rung(index, label, figures(1000, 0, sorted(values)[len(values) // 2], 10.0)).model_copy(
            update={"repeats": [rung(index, label, figures(1000, 0, v, 10.0)) for v in values]}
        )
        for index, (label, values) in enumerate(label_values)
    ]
    return Results(ladder="l", created="now", claims=[], rungs=rungs, provenance=provenance or {})


def write(tmp_path: Path, name: str, doc: Results) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "results.json").write_text(doc.model_dump_json(indent=2))
    return folder


def test_compare_labels_each_rung_with_the_test_behind_it() -> None:
    a = repeated([("on", [1000.0, 1010, 990, 1005, 995]), ("off", [500.0, 505, 495, 502, 498])])
    b = repeated([("on", [1200.0, 1210, 1190, 1205, 1195]), ("off", [498.0, 507, 500, 503, 496])])
    first, second = compare_rows(a, b)
    assert first["B vs A"].startswith("better: 1.200x")
    assert second["B vs A"].startswith("no detectable change")
    few = compare_rows(repeated([("on", [1000.0, 1010, 990])]), repeated([("on", [1200.0, 1210, 1190])]))
    assert few[0]["B vs A"].startswith("inconclusive (n = 3 + 3: too few repeats to tell): 1.200x")


def test_fail_on_regression_exits_non_zero_only_for_a_supported_regression(tmp_path: Path) -> None:
    base = write(tmp_path, "base", repeated([("on", [1000.0, 1010, 990, 1005, 995])]))
    worse = write(tmp_path, "worse", repeated([("on", [900.0, 905, 895, 902, 898])]))
    noisy = write(tmp_path, "noisy", repeated([("on", [800.0, 1000, 1200, 900, 1100])]))
    slight = write(tmp_path, "slight", repeated([("on", [980.0, 985, 975, 982, 978])]))
    # Three repeats a side are too few to label anything worse: however far apart, no failure.
    few = write(tmp_path, "few", repeated([("on", [1000.0, 1010, 990])]))
    few_worse = write(tmp_path, "few-worse", repeated([("on", [500.0, 505, 495])]))
    runner = CliRunner()
    failed = runner.invoke(main, ["lab", "compare", str(base), str(worse), "--fail-on-regression", "5%"])
    assert failed.exit_code == 1, failed.output
    assert "regression >= 5%: on: rps worse: 0.900x" in failed.output
    for one, other in ((base, noisy), (base, slight), (few, few_worse)):
        passed = runner.invoke(main, ["lab", "compare", str(one), str(other), "--fail-on-regression", "5%"])
        assert passed.exit_code == 0, passed.output


def test_compare_warns_when_the_runs_come_from_different_machines(tmp_path: Path) -> None:
    machine = Machine(cpu_model="x", cores=2, memory_gb=8.0, kernel="6.1", hostname="a")
    software = Software(
        python="3.11", implementation="cpython", packages={"tenk": "0.1"}, k6="k6 v1", git_sha="", git_dirty=False
    )
    a = write(tmp_path, "a", repeated([("on", [1.0])], {"machine": machine, "software": software}))
    b = write(tmp_path, "b", repeated([("on", [1.0])], {"machine": {**machine, "cores": 8}, "software": software}))
    out = CliRunner().invoke(main, ["lab", "compare", str(a), str(b)])
    assert out.exit_code == 0
    assert "warning: the runs differ: machine.cores: 2 vs 8" in out.output


def test_merged_segment_histograms_give_the_p99_of_all_samples_within_hdr_precision(tmp_path: Path) -> None:
    rng = random.Random(7)
    # Two generator machines that saw different latencies: averaging their p99s would be wrong.
    fast = [rng.lognormvariate(1.0, 0.4) for _ in range(20_000)]
    slow = [rng.lognormvariate(2.5, 0.8) for _ in range(5_000)]
    parts = []
    for index, samples in enumerate((fast, slow), start=1):
        path = tmp_path / f"seg{index}.csv"
        rows = ["metric_name,timestamp,metric_value,status"]
        rows += [f"http_req_duration,1,{ms:.6f},200" for ms in samples] + ["http_reqs,1,1.000000,200"]
        path.write_text("\n".join(rows) + "\n")
        histogram = latency.histogram_from_k6_csv(path)
        seg = figures(len(samples), 0, len(samples) / 10, 0.0).model_copy(
            update={"p99_ms": latency.percentile_ms(histogram, 99), "latency_hdr": latency.encode(histogram)}
        )
        parts.append(result([("r", seg)], f"{index}/2"))
    merged = merge_results(parts).rungs[0].figures
    union = sorted(round(ms * 1000) for ms in fast + slow)
    true_p99_ms = union[math.ceil(0.99 * len(union)) - 1] / 1000
    assert merged.percentiles.startswith("exact")
    assert merged.p99_ms == pytest.approx(true_p99_ms, rel=2e-3)
    weighted = parts[0].rungs[0].figures.p99_ms * 20_000 + parts[1].rungs[0].figures.p99_ms * 5_000
    assert abs(weighted / 25_000 - true_p99_ms) > 0.05 * true_p99_ms  # the old approximation was off


def test_a_damaged_results_file_is_refused_with_the_field_named(tmp_path: Path) -> None:
    doc = json.loads(repeated([("on", [1.0, 2.0])]).model_dump_json())
    del doc["rungs"][0]["figures"]["p99_ms"]
    folder = tmp_path / "damaged"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(doc))
    with pytest.raises(LabError, match=r"rungs\.0\.figures\.p99_ms: Field required"):
        load_results(folder)


OLD_RESULTS = Path(__file__).parent / "data" / "results-444eba8.json"


def key_paths(value: Any, path: str = "") -> set[str]:
    """Every key's path in a JSON document, list items by position; free-form maps left opaque."""
    if isinstance(value, list):
        return {p for i, item in enumerate(value) for p in key_paths(item, f"{path}[{i}]")}
    if not isinstance(value, dict):
        return set()
    paths = set()
    for key, item in value.items():
        paths.add(f"{path}.{key}")
        if key != "k6_summary":
            paths |= key_paths(item, f"{path}.{key}")
    return paths


def test_a_results_file_written_before_the_models_still_loads_and_keeps_every_key() -> None:
    # A real run's results.json from 444eba8 (TypedDicts), trimmed: k6 summaries and series cut short.
    old = load_results(OLD_RESULTS)
    assert [rung.label for rung in old.rungs] == ["one slot", "four slots"]
    assert old.rungs[1].repeats[0].server.cpu_cores_mean is not None
    assert "four slots cut the tail 10x" in markdown(old)
    rewritten = json.loads(old.model_dump_json())
    assert key_paths(json.loads(OLD_RESULTS.read_text())) <= key_paths(rewritten)


def test_a_results_file_from_a_newer_tenk_with_fields_this_one_lacks_still_loads(tmp_path: Path) -> None:
    doc = json.loads(repeated([("on", [1.0, 2.0])]).model_dump_json())
    doc["rungs"][0]["figures"]["p999_ms"] = 12.5  # a figure some later version measures
    doc["rungs"][0]["repeats"][0]["verdict"]["confidence"] = "high"
    doc["generator_fleet"] = ["a", "b"]
    folder = tmp_path / "newer"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(doc))
    assert load_results(folder) == repeated([("on", [1.0, 2.0])])


def test_results_round_trip_through_json_unchanged(tmp_path: Path) -> None:
    doc = repeated([("on", [1.0, 2.0, 3.0]), ("off", [4.0, 5.0, 6.0])])
    folder = write(tmp_path, "round", doc)
    assert load_results(folder) == doc


def test_segments_with_repeats_merge_repeat_by_repeat_then_take_the_median() -> None:
    def segment(index: int, goodputs: list[float]) -> Results:
        doc = repeated([("r", goodputs)]).model_copy(update={"segment": f"{index}/2"})
        for k, repeat in enumerate(doc.rungs[0].repeats):
            histogram = latency.new_histogram()
            latency.record_ms(histogram, [float(index * 10 + k)] * 100)
            repeat.figures.latency_hdr = latency.encode(histogram)
            repeat.figures.requests = 100
        return doc

    merged = merge_results([segment(1, [100.0, 110.0]), segment(2, [200.0, 220.0])]).rungs[0]
    assert [r.value for r in merged.repeats] == [300.0, 330.0]  # goodput adds up per repeat
    assert merged.estimate is not None
    assert merged.estimate.values == (300.0, 330.0)
    first = merged.repeats[0].figures
    assert first.percentiles.startswith("exact")
    assert first.requests == 200
    assert first.p99_ms == pytest.approx(20.0, rel=1e-3)  # segment 2's 20 ms is the top 50 %
