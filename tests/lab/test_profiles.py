"""`tenk lab run --profile`: py-spy samples the target's workers during each measured step, and the run
writes a flame graph per rung and a differential one that names what changed.

Real k6, a real uvicorn target with two workers on one CPU, py-spy on the other; a few seconds a rung.
The target (`profile_app`) burns its CPU in functions named for it, so the profile has a known answer.
"""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tenk.lab.definition.ladder import load_ladder
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.profiling import py_spy_binary
from tenk.lab.results.record import run_ladder
from tests.lab.test_capacity import lab_env, mix_file

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core for the target and one for the rest"),
    pytest.mark.skipif(py_spy_binary() is None, reason="py-spy is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="py-spy needs ptrace on the target: run as root here"),
]
TARGET_CPU = sorted(os.sched_getaffinity(0))[0]
SVG = "{http://www.w3.org/2000/svg}"


def profiled_run(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    mix_file(tmp_path)
    path = tmp_path / "profiled.toml"
    path.write_text(
        f"""
name = "profiled"
repeats = 1
profile = true
[defaults]
target = "tests.lab.profile_app:app"
server = "uvicorn"
workers = 2
cpus = "{TARGET_CPU}"
cpu_budget = "none"
mix = "work.toml"
rate = 20
duration_s = 4
warmup_s = 1
slo_p99_ms = 1000
[defaults.env]
STEADY_MS = "4"
[[rung]]
label = "steady only"
[[rung]]
label = "with extra"
env = {{ EXTRA_MS = "16" }}
"""
    )
    options = RunOptions(results_root=tmp_path / "results", base_env=lab_env(), profile_rate_hz=200)
    out = run_ladder(load_ladder(path), options)
    return out, json.loads((out / "results.json").read_text())["rungs"]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    return profiled_run(tmp_path_factory.mktemp("profiled"))


def _named(function: str, name: str) -> bool:
    # py-spy names a frame "function (file)".
    return function.split(" (")[0] == name


def test_each_profiled_rung_has_a_flame_graph_of_well_formed_svg(profiled: tuple[Path, list[dict[str, Any]]]) -> None:
    out, rungs = profiled
    first, second = (rung["profile"] for rung in rungs)
    assert first["flame"] == "profiles/rung-01.svg"
    assert second["flame"] == "profiles/rung-02.svg"
    assert second["diff"] == "profiles/rung-02-vs-rung-01.svg"
    assert not first["diff"]
    for name in (first["flame"], second["flame"], second["diff"]):
        root = ET.parse(out / name).getroot()
        assert root.tag == f"{SVG}svg"
        assert root.findall(f".//{SVG}rect"), name
    assert first["samples"] > 0
    assert first["rate_hz"] == 200
    # py-spy's own cost is recorded beside its samples.
    assert first["sampled_s"] > 0
    assert first["sampler_cpu_s"] > 0
    # The warm-up is never sampled: one measured step a rung.
    assert [Path(stacks).parent.name for stacks in first["stacks"]] == ["run-01"]


def test_the_top_functions_include_the_one_the_target_burns_its_cpu_in(
    profiled: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, rungs = profiled
    top = [entry["function"] for entry in rungs[0]["profile"]["top"]]
    assert any(_named(function, "_spin_in_steady") for function in top), top
    steady = next(entry for entry in rungs[0]["profile"]["top"] if _named(entry["function"], "_spin_in_steady"))
    assert 0 < steady["self_share"] <= steady["total_share"] <= 1


def test_the_differential_ranks_first_the_function_only_the_second_rung_runs(
    profiled: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, rungs = profiled
    changed = rungs[1]["profile"]["changed"]
    assert _named(changed[0]["function"], "_spin_in_extra"), changed
    assert changed[0]["before"] == 0
    assert changed[0]["points"] > 0
    assert rungs[1]["profile"]["against"] == "steady only"


def test_the_reports_link_the_graphs_and_name_the_functions(profiled: tuple[Path, list[dict[str, Any]]]) -> None:
    out, _ = profiled
    markdown, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    for report in (markdown, page):
        assert "profiles/rung-01.svg" in report
        assert "profiles/rung-02-vs-rung-01.svg" in report
        assert "_spin_in_extra" in report


def test_py_spy_is_found_beside_the_interpreter() -> None:
    assert py_spy_binary() == str(Path(sys.executable).with_name("py-spy"))
