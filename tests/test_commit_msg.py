from __future__ import annotations

import pytest

from tools.commit_msg import MAX_SUBJECT, problems


@pytest.mark.parametrize(
    "message",
    [
        "Refuse a cursor signed for another resource",
        "Embed the seed in the image\n\nWhy: the body, wrapped, with figures 1.5x.\n",
        "Pass the pool to the worker",
        "Merge branch 'sec-edge'",
        "Add a check\n# Please enter the commit message; lines starting with '#' are ignored.\n",
    ],
)
def test_imperative_subjects_within_the_limit_pass(message: str) -> None:
    assert problems(message) == []


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("Added a check", "'Added'"),
        ("Adding a check", "'Adding'"),
        ("Fixes the pool", "'Fixes'"),
        ("README: fixes", "'README:'"),
        ("fix the pool", "'fix'"),
        ("Fix the pool.", "period"),
        ("Fix the pool\nbody at once", "second line"),
        ("Fix " + "x" * MAX_SUBJECT, "characters"),
        ("Merge " + "x" * MAX_SUBJECT, "characters"),
        ("fixup! Fix the pool", "'fixup!'"),
        ("", "empty"),
    ],
)
def test_a_subject_against_the_rule_is_named(message: str, problem: str) -> None:
    assert any(problem in found for found in problems(message)), problems(message)
