"""TENK_HOT_LANE turns the derived lane off; the access log no longer does (the edge writes it for both)."""

from __future__ import annotations

import pytest

from harness.stack import Stack
from tenk.app import create_app
from tenk.platform.fast_paths import FastPath

# The lane's own behaviour: with the stock switch FastAPI's routing serves these routes instead.
pytestmark = pytest.mark.fast_path(FastPath.HOT_LANE)


def test_the_lane_is_on_by_default_and_off_with_the_switch(stack: Stack) -> None:
    lane = create_app(stack.settings()).lane
    assert lane is not None
    assert "/products/{product_id}" in [route.template for route in lane.routes["GET"]]
    assert create_app(stack.settings(hot_lane=False)).lane is None
    assert create_app(stack.settings(access_log=True)).lane is not None
