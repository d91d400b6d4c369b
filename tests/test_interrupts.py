"""Ctrl-C comes out of every tenk command as KeyboardInterrupt (click's "Aborted!"), never as a traceback."""

from __future__ import annotations

import asyncio

import pytest

from tenk import interrupts


async def _cancelled_before_it_starts_work() -> None:
    # What asyncio.run's own Ctrl-C handler does when Ctrl-C lands while asyncio.run is setting it up:
    # the main task is cancelled and asyncio.run, having lost count, lets the CancelledError out.
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    await asyncio.sleep(0)


def test_a_cancelled_main_task_comes_out_as_keyboard_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt):
        interrupts.run(_cancelled_before_it_starts_work())


async def _answer() -> int:
    return 42


def test_a_finished_main_returns_its_result() -> None:
    assert interrupts.run(_answer()) == 42
