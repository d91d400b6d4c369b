"""The doorkeeper admits a key from its second sighting on, and only then, within a bounded memory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tenk.search.admission import Doorkeeper


@given(keys=st.lists(st.integers(0, 40), max_size=200), window=st.integers(1, 50))
def test_a_key_is_admitted_only_if_it_was_seen_before(keys: list[int], window: int) -> None:
    doorkeeper = Doorkeeper(window)
    seen: set[int] = set()
    for key in keys:
        assert not doorkeeper.seen_before(key) or key in seen
        seen.add(key)


@given(keys=st.lists(st.text(max_size=8), unique=True, max_size=100))
def test_a_key_repeated_within_the_window_is_admitted(keys: list[str]) -> None:
    doorkeeper = Doorkeeper(window=len(keys) + 1)
    assert not any(doorkeeper.seen_before(key) for key in keys)
    assert all(doorkeeper.seen_before(key) for key in keys)


def test_memory_is_bounded_to_two_windows_of_keys() -> None:
    doorkeeper = Doorkeeper(window=10)
    for key in range(1_000):
        doorkeeper.seen_before(key)
    assert not doorkeeper.seen_before(0)  # long forgotten
    assert doorkeeper.seen_before(995)  # recent
