"""The suite's deadlines grow with the slowest start this machine measured, and never drop below the floor."""

from __future__ import annotations

import pytest

from harness import deadlines
from harness.deadlines import FLOOR_S, STARTS_PER_WAIT, deadline_s, record_start, timed_start


@pytest.fixture(autouse=True)
def nothing_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    # The session's own measurements are put back after each test.
    monkeypatch.setattr(deadlines, "_slowest_start_s", 0.0)


def test_a_deadline_is_the_floor_until_a_start_slower_than_the_floor_allows_was_measured() -> None:
    assert deadline_s() == FLOOR_S
    record_start(FLOOR_S / STARTS_PER_WAIT)
    assert deadline_s() == FLOOR_S
    record_start(FLOOR_S)
    assert deadline_s() == STARTS_PER_WAIT * FLOOR_S


def test_a_quicker_start_later_never_shortens_a_deadline() -> None:
    record_start(FLOOR_S)
    record_start(0.1)
    assert deadline_s() == STARTS_PER_WAIT * FLOOR_S


def test_a_start_that_failed_measured_nothing() -> None:
    with pytest.raises(RuntimeError), timed_start():
        raise RuntimeError("did not listen")
    assert deadline_s() == FLOOR_S


def test_a_timed_start_counts_toward_later_deadlines(monkeypatch: pytest.MonkeyPatch) -> None:
    # So many starts per wait that any start measured at all lifts the deadline above the floor.
    monkeypatch.setattr(deadlines, "STARTS_PER_WAIT", 10**12)
    with timed_start():
        pass
    assert deadline_s() > FLOOR_S
