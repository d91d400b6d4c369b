"""`DirectState`: the hot lane's view of `app.state` reads, writes and refuses as starlette's `State` does."""

from __future__ import annotations

import pytest
from starlette.datastructures import State

from tenk.platform.lane.dispatch import DirectState


def test_the_view_reads_what_the_state_holds_even_when_stored_after_the_view_was_made() -> None:
    state = State()
    view = DirectState(state)
    state.catalog = "the catalog"  # the lifespan runs after the lane is derived
    assert view.catalog == "the catalog"
    assert view["catalog"] == "the catalog"
    assert list(view) == ["catalog"]
    assert len(view) == 1


def test_what_is_written_through_the_view_is_the_states() -> None:
    state = State()
    view = DirectState(state)
    view.settings = "settings"
    assert state.settings == "settings"


def test_a_name_never_stored_is_an_attribute_error_as_in_state() -> None:
    view = DirectState(State())
    with pytest.raises(AttributeError, match="no attribute 'search'"):
        view.search  # noqa: B018
