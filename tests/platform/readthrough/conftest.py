"""The widgets example's database on the shared stack, made once."""

from __future__ import annotations

import pytest

from harness.stack import Stack
from tests.platform.readthrough.widgets import widgets_database


@pytest.fixture(scope="session")
async def widgets_db(stack: Stack) -> str:
    return await widgets_database(stack)
