"""The shipped presets: each parses, keeps the one-variable rule, quotes its study, and one runs end to end."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
from fastapi import FastAPI

from tenk.lab.cli import PRESET_DIR
from tenk.lab.ladder import Ladder, load_ladder
from tenk.lab.runner import RunOptions, run_ladder
from tests.conftest import TEST_API_KEY, Stack

PRESETS = ["async-ladder", "slow-upstream", "pooling", "cache", "ingest", "search", "server-config"]
SEEDS = Path(__file__).resolve().parents[3] / "shared" / "seeds"
REPO = Path(__file__).resolve().parents[2]


def preset(name: str) -> Ladder:
    return load_ladder(PRESET_DIR / f"{name}.toml")


def test_exactly_the_issue_presets_ship() -> None:
    assert sorted(path.stem for path in PRESET_DIR.glob("*.toml")) == sorted(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_parses_and_every_rung_changes_one_variable_or_says_so(name: str) -> None:
    ladder = preset(name)
    assert ladder.name == name
    assert len(ladder.rungs) >= 2
    for rung in ladder.rungs[1:]:
        assert rung.changes, f"{rung.label!r} changes nothing"
        assert len(rung.changes) == 1 or rung.allow_multi, rung.changed


@pytest.mark.parametrize("name", PRESETS)
def test_preset_claims_quote_a_study_and_compare_rungs_that_measure_the_metric(name: str) -> None:
    ladder = preset(name)
    assert ladder.claims, "each preset sets a study's claim beside what it measures"
    rungs = {rung.label: rung for rung in ladder.rungs}
    for claim in ladder.claims:
        assert re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt", claim.source), claim.source
        if SEEDS.is_dir():
            assert (SEEDS / claim.source).is_file(), claim.source
        assert claim.claimed_ratio > 0
        if claim.metric == "capacity":
            assert rungs[claim.from_rung].config.capacity, claim.text
            assert rungs[claim.to_rung].config.capacity, claim.text


@pytest.mark.parametrize("name", PRESETS)
def test_preset_baselines_are_plain_apps(name: str) -> None:
    for rung in preset(name).rungs:
        if rung.config.target.startswith("baseline:"):
            module = importlib.import_module(f"tenk.lab.baselines.{rung.config.target.split(':', 1)[1]}")
            assert isinstance(module.app, FastAPI)
            assert not rung.config.factory


def test_async_ladder_fits_make_lab_in_ten_minutes() -> None:
    from tenk.lab.runner import time_bound_s

    assert time_bound_s(preset("async-ladder")) <= 540  # and under a minute for the stack and seed


def test_server_config_takes_any_app_and_mix() -> None:
    ladder = load_ladder(
        PRESET_DIR / "server-config.toml",
        {"target": "tests.lab.semaphore_app:app", "factory": False, "mix": "tasks-list"},
    )
    assert {rung.config.target for rung in ladder.rungs} == {"tests.lab.semaphore_app:app"}
    assert {rung.config.mix for rung in ladder.rungs} == {"tasks-list"}
    assert [rung.label for rung in ladder.rungs][-1] == "workers = cores"


@pytest.mark.slow
def test_async_ladder_smoke_run_completes_and_its_report_renders(stack: Stack, tmp_path: Path) -> None:
    # The real preset, every rung and process, at a tiny fixed rate for two seconds a rung.
    ladder = load_ladder(
        PRESET_DIR / "async-ladder.toml",
        {"capacity": False, "rate": 20, "duration_s": 2, "warmup_s": 0},
    )
    env = stack.env(TENK_LAB_API_KEY=TEST_API_KEY, PYTHONPATH=str(REPO))
    out = run_ladder(ladder, RunOptions(results_root=tmp_path, base_env=env))
    results = json.loads((out / "results.json").read_text())
    labels = [rung.label for rung in ladder.rungs]
    assert [rung["label"] for rung in results["rungs"]] == labels
    for rung in results["rungs"]:
        figures = rung["figures"]
        assert figures["requests"] > 0, rung["label"]
        assert figures["error_rate"] == 0, (rung["label"], figures["endpoints"])
    report = (out / "report.md").read_text()
    for label in labels:
        assert label in report
    assert "41.40x" in report
    assert "001_1f6846444dcf4a5a.txt" in report
    html = (out / "report.html").read_text()
    assert "sync handlers" in html
    assert "<table" in html
