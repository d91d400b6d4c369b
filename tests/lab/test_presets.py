"""The shipped presets: each parses, keeps the one-variable rule, and pairs its claims with the study's own
figures. That each runs end to end, every rung and process, is tests/lab/test_shipped_ladders.py's."""

from __future__ import annotations

import ast
import importlib
import operator
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from tenk.lab.cli import PRESET_DIR
from tenk.lab.definition.ladder import Claim, Ladder, load_ladder
from tenk.lab.measuring.runner import time_bound_s
from tenk.lab.targets.baselines import WSGI_BASELINES
from tenk.settings import Settings
from tenk.settings_doc import documented

PRESETS = [
    "async-ladder",
    "ladder-study",
    "slow-upstream",
    "pooling",
    "cache",
    "ingest",
    "search",
    "server-config",
    "pool-size",
    "depends-cost",
]
# Presets whose study gives no figure for what they measure: they say so instead of borrowing a ratio.
WITHOUT_CLAIMS = {"pool-size"}
# Presets whose study gives only a shape: their claims are qualitative, checked as expectations.
QUALITATIVE = {"slow-upstream"}
REPO = Path(__file__).resolve().parents[2]
# The studies sit in shared/seeds beside the repo (../shared/seeds), or beside the folder of worktrees.
SEEDS = next(
    (folder / "shared" / "seeds" for folder in REPO.parents if (folder / "shared" / "seeds").is_dir()),
    REPO.parent / "shared" / "seeds",
)

# "a / b = r", "1 + 500 / 100 = 6.0", "3100 / ((800 + 1200) / 2) = 3.1": figures, arithmetic, the result.
_FIGURE = r"\d+(?:\.\d+)?k?"
_DERIVATION = re.compile(r"((?:\(|\d)[\dk.()+\-*/ ]*[\dk)])\s*=\s*(\d+(?:\.\d+)?)")
# Arithmetic constants a derivation may use without the study printing them.
_CONSTANTS = {"1", "2", "100"}
_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def preset(name: str) -> Ladder:
    return load_ladder(PRESET_DIR / f"{name}.toml")


def _evaluate(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError(f"not plain arithmetic: {ast.dump(node)}")


def derivations(text: str) -> list[tuple[list[str], float, str]]:
    """Each "expression = result" in a claim: the figures it uses, its value, the result as written."""
    found = []
    for expression, result in _DERIVATION.findall(" ".join(text.split())):
        figures = re.findall(_FIGURE, expression)
        python = re.sub(r"(\d+(?:\.\d+)?)k", r"(\1 * 1000)", expression)
        found.append((figures, _evaluate(ast.parse(python, mode="eval").body), result))
    return found


def test_derivations_are_read_as_written() -> None:
    assert derivations("x: 10.4k / 4.2k = 2.48, and 3100 / ((800 + 1200) / 2) = 3.1.") == [
        (["10.4k", "4.2k"], 10400 / 4200, "2.48"),
        (["3100", "800", "1200", "2"], 3.1, "3.1"),
    ]
    assert derivations("the v1 -> v2 step, no figures") == []


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
def test_every_tenk_setting_a_preset_sets_exists_and_makes_a_valid_tree(name: str) -> None:
    leaves = {leaf.env_name: leaf.path for leaf in documented()}
    for rung in preset(name).rungs:
        tree: dict[str, Any] = {}
        for variable, value in rung.config.env.items():
            if not variable.startswith("TENK_") or variable.startswith("TENK_LAB_"):
                continue
            assert variable in leaves, f"{rung.label!r} sets {variable}, which is no setting"
            *branches, field = leaves[variable]
            node = tree
            for branch in branches:
                node = node.setdefault(branch, {})
            node[field] = value
        Settings.model_validate(tree)  # e.g. a pool ceiling below the pool's floor is refused


@pytest.mark.parametrize("name", PRESETS)
def test_preset_claims_quote_a_study_and_compare_rungs_that_measure_the_metric(name: str) -> None:
    ladder = preset(name)
    if name in WITHOUT_CLAIMS:
        assert not ladder.claims
        assert "no [[claim]]" in ladder.description.lower(), "say why there is no claim"
        return
    assert ladder.claims, "each preset sets a study's claim beside what it measures"
    rungs = {rung.label: rung for rung in ladder.rungs}
    for claim in ladder.claims:
        assert re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt", claim.source), claim.source
        if name in QUALITATIVE:
            assert claim.claimed_ratio is None, "no borrowed ratio"
            assert claim.expect, "a qualitative claim is checked as expectations"
        else:
            assert claim.claimed_ratio is not None
            assert claim.claimed_ratio > 0
        assert claim.source.split("_")[0] in claim.text, "the claim names its study"
        for label in (claim.from_rung, claim.to_rung):
            config = rungs[label].config
            assert config.capacity == (claim.metric == "capacity"), (claim.text, label)
            if claim.metric == "capacity":
                # The studies measured closed-loop RPS; a capacity claim must say it measures something else.
                assert "capacity under" in claim.text, claim.text


def _claims() -> list[tuple[str, Claim]]:
    return [(name, claim) for name in PRESETS for claim in preset(name).claims]


@pytest.mark.parametrize(("name", "claim"), _claims(), ids=lambda v: v if isinstance(v, str) else v.from_rung)
def test_every_claimed_ratio_is_derived_in_its_text_from_figures_in_the_cited_study(name: str, claim: Claim) -> None:
    if claim.claimed_ratio is None:
        # A qualitative claim quotes the study instead: every quotation must be in it, word for word.
        quotes = re.findall(r'"([^"]+)"', " ".join(claim.text.split()))
        assert quotes, f"quote the study's words: {claim.text!r}"
        if not SEEDS.is_dir():
            pytest.skip(f"the studies are not beside the repo ({SEEDS})")
        seed = " ".join((SEEDS / claim.source).read_text().split())
        for quote in quotes:
            assert quote in seed, f"{quote!r} not in {claim.source}"
        return
    found = derivations(claim.text)
    assert found, f"write the derivation into the claim: {claim.text!r}"
    for _, value, result in found:
        decimals = len(result.partition(".")[2])
        assert round(value, decimals) == float(result), (claim.text, value)
    assert claim.claimed_ratio in {float(result) for _, _, result in found}, claim.text
    if not SEEDS.is_dir():
        pytest.skip(f"the studies are not beside the repo ({SEEDS}); the figures cannot be looked up")
    seed = (SEEDS / claim.source).read_text()
    for figures, _, _ in found:
        for figure in figures:
            if figure not in _CONSTANTS:
                assert re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", seed), f"{figure} not in {claim.source}"


@pytest.mark.parametrize("name", PRESETS)
def test_preset_baselines_are_plain_apps(name: str) -> None:
    for rung in preset(name).rungs:
        if rung.config.target.startswith("baseline:"):
            module = importlib.import_module(f"tenk.lab.targets.baselines.{rung.config.target.split(':', 1)[1]}")
            if rung.config.target in WSGI_BASELINES:
                assert rung.config.server == "gunicorn", "a WSGI app needs gunicorn's sync workers"
                assert callable(module.app)
                assert not isinstance(module.app, FastAPI)
            else:
                assert isinstance(module.app, FastAPI)
            assert not rung.config.factory


def test_async_ladder_starts_from_blocking_calls_and_keeps_the_thread_pool_as_its_own_rung() -> None:
    targets = [rung.config.target for rung in preset("async-ladder").rungs]
    assert targets[:3] == ["baseline:naive_blocking", "baseline:naive_sync", "baseline:naive_async"]


def test_ingest_follows_the_studys_ladder_and_labels_the_step_it_set_aside() -> None:
    rungs = preset("ingest").rungs
    assert [rung.changed for rung in rungs[1:]] == [
        "target: baseline:naive_async -> tenk",
        "env.TENK_INGEST_WRITE_MODE: insert -> copy",
        "env.TENK_INGEST_BATCH: 1 -> 1000",
        "workers: 1 -> 2",
        "ingest_workers: 1 -> 2",
    ]
    assert rungs[-1].label.startswith("extra:")
    assert all(rung.config.capacity for rung in rungs), "a fixed offered rate would cap the ratio"
    assert all(rung.config.pass_if_backlog_stable for rung in rungs), "accepted but not landed is not capacity"


def test_cache_turns_redis_io_threads_on_as_a_rung_of_its_own_on_a_private_redis() -> None:
    rungs = preset("cache").rungs
    assert all(rung.config.redis_io_threads >= 1 for rung in rungs), "every rung on its own empty Redis"
    by_label = {rung.label: rung for rung in rungs}
    assert by_label["Redis io-threads 2"].changed == "redis_io_threads: 1 -> 2"


def test_search_compares_the_wsgi_baseline_both_ways_the_study_and_the_lab_measure() -> None:
    ladder = preset("search")
    by_label = {rung.label: rung.config for rung in ladder.rungs}
    for claim in ladder.claims:
        assert by_label[claim.from_rung].target == "baseline:wsgi_sync"
    wrk = [config for config in by_label.values() if config.engine == "wrk"]
    assert wrk
    assert all(config.connections == 60 and config.duration_s == 10 for config in wrk)


def test_one_round_of_the_async_ladder_fits_make_lab_in_ten_minutes() -> None:
    # `make lab` runs one round of every rung; each further repeat adds as much again.
    assert time_bound_s(preset("async-ladder"), repeats=1) <= 540  # and under a minute for the stack and seed


def test_server_config_takes_any_app_and_mix() -> None:
    ladder = load_ladder(
        PRESET_DIR / "server-config.toml",
        {"target": "tests.lab.semaphore_app:app", "factory": False, "mix": "tasks-list"},
    )
    assert {rung.config.target for rung in ladder.rungs} == {"tests.lab.semaphore_app:app"}
    assert {rung.config.mix for rung in ladder.rungs} == {"tasks-list"}
    assert [rung.label for rung in ladder.rungs][-1] == "workers = cores"
