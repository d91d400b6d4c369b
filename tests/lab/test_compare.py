"""Merging segment results: counts and rates add up exactly, percentiles are estimates with bounds."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tenk.cli import main
from tenk.lab.compare import compare_rows, merge_results
from tenk.lab.errors import LabError
from tenk.lab.k6 import k6_binary, segment_args
from tests.conftest import ServerProcess, Stack


def figures(requests: int, errors: int, rps: float, p99: float, dropped: int = 0) -> dict[str, Any]:
    return {
        "engine": "k6", "offered_rps": 1000.0, "duration_s": 10.0, "requests": requests, "rps": rps,
        "p50_ms": p99 / 4, "p95_ms": p99 / 2, "p99_ms": p99, "max_ms": p99 * 2, "errors": errors,
        "error_rate": errors / requests, "dropped": dropped, "generator_cpu_s": 1.0, "generator_cores_used": 0.1,
        "generator_util": 0.1, "generator_cores": 1, "generator_bound": dropped > 0,
        "generator_reasons": [], "segment": "",
        "endpoints": {"a": {"requests": requests, "share": 1.0, "expected_share": 1.0, "p50_ms": 1.0,
                            "p99_ms": p99, "error_rate": errors / requests}},
    }  # fmt: skip


def result(label_values: list[tuple[str, dict[str, Any]]], segment: str = "") -> dict[str, Any]:
    rungs = [
        {
            "index": i, "label": label, "changed": "x", "changes": [], "multi_variable": False, "mode": "rate",
            "value": f["rps"], "figures": f, "server": {}, "capacity": None, "config": {"slo_p99_ms": 100},
            "verdict": {"server_figure": True, "generator_bound": False, "slo_met": True, "notes": []},
        }
        for i, (label, f) in enumerate(label_values)
    ]  # fmt: skip
    return {"ladder": "l", "created": "now", "segment": segment, "claims": [], "rungs": rungs}


def test_merged_counts_are_sums_and_percentiles_carry_bounds() -> None:
    a = result([("r", figures(5000, 5, 500.0, 20.0))], "1/2")
    b = result([("r", figures(3000, 9, 300.0, 40.0, dropped=2))], "2/2")
    merged = merge_results([a, b])["rungs"][0]["figures"]
    assert merged["requests"] == 8000
    assert merged["errors"] == 14
    assert merged["dropped"] == 2
    assert merged["rps"] == 800.0
    assert merged["error_rate"] == pytest.approx(14 / 8000)
    assert merged["max_ms"] == 80.0
    assert merged["p99_ms"] == pytest.approx((20 * 5000 + 40 * 3000) / 8000)
    assert merged["p99_bounds_ms"] == [20.0, 40.0]
    assert merged["generator_bound"]  # one segment dropped iterations: the whole run is flagged
    assert merged["endpoints"]["a"]["requests"] == 8000


def test_segments_of_different_ladders_are_not_merged() -> None:
    a = result([("r", figures(10, 0, 1.0, 1.0))])
    b = copy.deepcopy(a)
    b["ladder"] = "other"
    with pytest.raises(LabError):
        merge_results([a, b])


def test_compare_gives_per_rung_and_rung_to_rung_ratios() -> None:
    a = result([("on", figures(1000, 0, 1000.0, 10.0)), ("off", figures(1000, 0, 500.0, 10.0))])
    b = result([("on", figures(1000, 0, 1100.0, 10.0)), ("off", figures(1000, 0, 605.0, 10.0))])
    first, second = compare_rows(a, b)
    assert first["B/A"] == "1.100"
    assert (second["A step"], second["B step"], second["step diff"]) == ("0.500x", "0.550x", "+10.0%")


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
