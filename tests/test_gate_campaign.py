"""`benchmarks/gate_campaign.py`: the rates it gives, the table it prints, and a campaign run in pieces.

Nothing here runs a gate: the figures come from trials written by hand, so that each rate is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.bench_budget import PlantCost
from benchmarks.gate_campaign import (
    SETTINGS,
    BudgetGate,
    Campaign,
    Trial,
    load,
    parse_setting,
    plan,
    run,
    save,
    table,
    wilson,
)

CI = SETTINGS["budget"]["ci"]


def _trial(planted: float, verdict: str, setting: str = "ci", delta: float = 0.01, wall_s: float = 40.0) -> Trial:
    return Trial(setting, planted, verdict, delta, wall_s, "2026-12-02T00:00:00Z", 1.0)


@pytest.mark.parametrize(
    ("hits", "trials", "low", "high"),
    # The Wilson score interval at 95 %, as tabled by Newcombe (1998), method 3.
    [(0, 20, 0.0, 0.1611), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (81, 263, 0.2553, 0.3662)],
)
def test_the_wilson_interval_is_the_tabled_one(hits: int, trials: int, low: float, high: float) -> None:
    found = wilson(hits, trials)
    assert found == pytest.approx((low, high), abs=0.0001)


def test_no_trials_say_nothing_about_a_rate() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


def test_the_table_gives_false_alarms_and_catches_per_size_with_their_intervals() -> None:
    campaign = Campaign("budget", {"ci": CI}, commit="abc1234")
    campaign.trials += [_trial(0.0, "pass", delta=0.012), _trial(0.0, "fail", delta=0.051)]
    campaign.trials += [_trial(0.05, "fail", wall_s=50.0), _trial(0.05, "fail", wall_s=60.0)]
    campaign.trials += [_trial(0.05, "error")]
    lines = table(campaign).splitlines()
    assert lines[0] == (
        "| setting | false alarms (A/A) | A/A change, median [min, max] | 5% caught | 5% as measured"
        " | runner s a gate run (median) | errors |"
    )
    # An error is neither a pass nor a catch: it is counted apart, and left out of the rates. The plant as
    # measured: B's median count over the budget (+1 %) against the A/A median's (+3.15 %).
    assert lines[2] == (
        "| ci (rounds 1) | 1/2 = 50% [9%, 91%] | +3.15% [+1.20%, +5.10%] | 2/2 = 100% [34%, 100%] | -2.1% | 45 | 1 |"
    )


def test_a_resumed_campaign_runs_only_what_the_first_piece_left(tmp_path: Path) -> None:
    out = tmp_path / "gate-budget.json"
    first = load(out, "budget", {"ci": CI}, "abc1234")
    first.trials += [_trial(0.0, "pass"), _trial(0.0, "pass"), _trial(0.05, "fail"), _trial(0.05, "error")]
    save(out, first)
    again = load(out, "budget", {"ci": CI}, "def5678")
    assert again.trials == first.trials
    assert again.notes == ["resumed at def5678 (begun at abc1234)"]
    wanted = {("ci", 0.0): 3, ("ci", 0.05): 2}
    # One A/A left, and the A/B that erred is run again.
    assert sorted(plan(wanted, again.trials)) == [("ci", 0.0), ("ci", 0.05)]


def test_a_campaign_refuses_a_setting_that_changed_meaning_or_another_gate(tmp_path: Path) -> None:
    out = tmp_path / "gate-budget.json"
    save(out, Campaign("budget", {"ci": CI}))
    with pytest.raises(SystemExit, match="setting 'ci' was"):
        load(out, "budget", {"ci": {"rounds": 3}}, "abc1234")
    with pytest.raises(SystemExit, match="holds the budget gate's trials"):
        load(out, "lab", {"ci": SETTINGS["lab"]["ci"]}, "abc1234")


def test_trials_are_interleaved_so_that_no_size_runs_all_first() -> None:
    wanted = {("ci", 0.0): 2, ("ci", 0.03): 2, ("ci", 0.1): 2}
    order = plan(wanted, [])
    assert order[:3] == [("ci", 0.0), ("ci", 0.03), ("ci", 0.1)]
    # The second round starts one place along.
    assert order[3:] == [("ci", 0.03), ("ci", 0.1), ("ci", 0.0)]


def test_max_minutes_stops_before_a_trial_that_would_not_end_in_time(tmp_path: Path) -> None:
    out = tmp_path / "gate-budget.json"
    campaign = Campaign("budget", {"ci": CI}, [_trial(0.0, "pass", wall_s=120.0)])
    ran = list(run(campaign, BudgetGate(["cached_hit"]), [("ci", 0.0)], out, max_s=60.0))
    assert ran == []
    saved = json.loads(out.read_text())
    assert len(saved["trials"]) == 1
    assert saved["notes"] == ["stopped by --max-minutes with 1 trials planned"]


def test_an_explicit_setting_starts_from_cis_and_refuses_an_unknown_key() -> None:
    assert parse_setting("ci", "lab") == ("ci", SETTINGS["lab"]["ci"])
    name, values = parse_setting("short:repeats=7,duration_s=10", "lab")
    assert (name, values["repeats"], values["duration_s"], values["ladder"]) == ("short", 7, 10.0, "local-cache-fixed")
    with pytest.raises(SystemExit, match="'repeat=7' is not key=value of one of"):
        parse_setting("short:repeat=7", "lab")
    with pytest.raises(SystemExit, match="repeats must be a int, not 'many'"):
        parse_setting("short:repeats=many", "lab")


def test_a_planted_budget_regression_is_that_fraction_of_what_the_path_costs_not_of_its_budget() -> None:
    # 50,000 instructions a request, 40 an iteration of the planted loop: 5 % is 2,500 instructions.
    cost = PlantCost(base=50_000.0, per_iteration=40.0)
    assert cost.iterations(0.05) == 62
    assert cost.iterations(0.20) == 250
    # Entering the loop costs 500 of them whatever its size: 5 % is 500 + 50 iterations.
    entered = PlantCost(base=50_000.0, per_iteration=40.0, fixed=500.0)
    assert entered.iterations(0.05) == 50
    with pytest.raises(ValueError, match="less than the loop's fixed cost"):
        entered.iterations(0.005)


def test_a_budget_trial_runs_cis_command_with_the_sized_plant() -> None:
    gate = BudgetGate(["cached_hit"])
    gate.iterations = {"cached_hit": {"0.05": 62}}
    argv = gate.argv(CI, 0.05)
    assert argv[1:] == [
        "-m", "benchmarks.bench_budget", "--rounds", "1", "--check", "--paths", "cached_hit",
        "--plant-iterations=cached_hit=62",
    ]  # fmt: skip
    assert "--plant-iterations" not in " ".join(gate.argv(CI, 0.0))
