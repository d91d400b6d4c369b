"""The arithmetic of stack samples: py-spy's raw lines collapsed, merged and shared out, and the trees the
flame graphs are drawn from."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from tenk.lab.results.flamegraph import render
from tenk.lab.results.flames import (
    Frame,
    Profile,
    Stack,
    call_tree,
    collapse,
    diff_tree,
    merge,
    self_shares,
    share_changes,
    top_functions,
    total_shares,
)

RAW = (
    'process 101:"python -m uvicorn app:app";process 102:"python -m uvicorn app:app";'
    "<module> (uvicorn);serve (app.py);spin (app.py) 7\n"
    'process 101:"python -m uvicorn app:app";<module> (uvicorn);serve (app.py) 3\n'
    "not a sample line\n"
)

frames = st.sampled_from(["a (x.py)", "b (x.py)", "c (y.py)", "<module> (z.py)", "d & <e> (w.py)"])
stacks = st.lists(frames, min_size=1, max_size=6).map(tuple)
profiles = st.dictionaries(stacks, st.integers(min_value=1, max_value=500), min_size=1, max_size=12).map(Counter)


def test_raw_lines_lose_their_process_frames_and_keep_their_counts() -> None:
    assert collapse(RAW) == Counter(
        {("<module> (uvicorn)", "serve (app.py)", "spin (app.py)"): 7, ("<module> (uvicorn)", "serve (app.py)"): 3}
    )


def test_the_same_stack_from_two_workers_is_one_stack() -> None:
    two = 'process 1:"w";f (a.py) 2\nprocess 2:"w";f (a.py) 5\n'
    assert collapse(two) == Counter({("f (a.py)",): 7})


def test_self_and_total_shares_of_a_known_profile() -> None:
    profile = collapse(RAW)
    assert self_shares(profile) == {"spin (app.py)": 0.7, "serve (app.py)": 0.3}
    assert total_shares(profile)["serve (app.py)"] == 1.0
    assert total_shares(profile)["spin (app.py)"] == 0.7


def test_a_recursive_function_counts_once_per_sample_in_its_total() -> None:
    profile: Profile = Counter({("f", "f", "f"): 4, ("g",): 4})
    assert total_shares(profile)["f"] == 0.5


@given(profiles)
def test_self_shares_sum_to_one_and_no_total_is_below_its_self(profile: Profile) -> None:
    own, anywhere = self_shares(profile), total_shares(profile)
    assert math.isclose(sum(own.values()), 1.0)
    for function, share in own.items():
        assert share <= anywhere[function] + 1e-12
        assert anywhere[function] <= 1 + 1e-12


@given(profiles, profiles)
def test_merging_adds_samples_and_keeps_every_stack(first: Profile, second: Profile) -> None:
    merged = merge([first, second])
    assert sum(merged.values()) == sum(first.values()) + sum(second.values())
    assert set(merged) == set(first) | set(second)


@given(profiles)
def test_a_profile_against_itself_changes_nothing_anywhere(profile: Profile) -> None:
    assert all(change.points == 0 for change in share_changes(profile, profile, count=100))

    def changes(frame: Frame) -> list[float]:
        return [frame.change] + [c for child in (frame.children or {}).values() for c in changes(child)]

    assert all(abs(change) < 1e-9 for change in changes(diff_tree(profile, profile)))


@given(profiles, profiles)
def test_the_changes_in_self_share_sum_to_zero(before: Profile, after: Profile) -> None:
    every = share_changes(before, after, count=1000)
    assert math.isclose(sum(change.points for change in every), 0.0, abs_tol=0.005 * len(every) + 1e-9)


def test_a_function_only_the_second_profile_runs_moves_most() -> None:
    before: Profile = Counter({("main", "steady"): 60, ("main",): 40})
    after: Profile = Counter({("main", "steady"): 60, ("main", "extra"): 60, ("main",): 40})
    changed = share_changes(before, after)
    assert changed[0].function == "extra"
    assert changed[0].before == 0
    assert math.isclose(changed[0].points, 37.5)


@given(profiles)
def test_no_frame_of_a_call_tree_is_wider_than_its_parent(profile: Profile) -> None:
    def check(frame: Frame) -> None:
        children = list((frame.children or {}).values())
        assert sum(child.share for child in children) <= frame.share + 1e-9
        for child in children:
            check(child)

    root = call_tree(profile)
    assert math.isclose(root.share, 1.0)
    check(root)
    check(diff_tree(profile, Counter({("other",): 1})))


def test_the_top_functions_rank_by_self_share() -> None:
    top = top_functions(collapse(RAW))
    assert [(f.function, f.self_share, f.total_share) for f in top] == [
        ("spin (app.py)", 0.7, 0.7),
        ("serve (app.py)", 0.3, 1.0),
    ]


@given(profiles, profiles)
def test_flame_graphs_are_well_formed_svg_whatever_the_names(before: Profile, after: Profile) -> None:
    for svg in (render(call_tree(after), "t <1>", "s & s"), render(diff_tree(before, after), "d", "", True)):
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_an_empty_profile_has_no_shares() -> None:
    empty: dict[Stack, int] = {}
    assert self_shares(empty) == {}
    assert top_functions(empty) == []


def test_the_noise_of_a_change_is_two_standard_errors_of_both_shares() -> None:
    even: Profile = Counter({("a",): 50, ("b",): 50})
    change = next(c for c in share_changes(even, even) if c.function == "a")
    # 0.5 of 100 samples a side: a standard error of 5 points each, sqrt(2) * 5 * 2 = 14.14 points.
    assert change.points == 0
    assert math.isclose(change.noise_points, 14.14)


@given(profiles, profiles)
def test_noise_is_never_negative_and_none_where_a_share_is_certain(before: Profile, after: Profile) -> None:
    for change in share_changes(before, after, count=100):
        assert change.noise_points >= 0
        if change.before in (0, 1) and change.after in (0, 1):
            assert change.noise_points == 0
