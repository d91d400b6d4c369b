"""Ctrl-C for tenk's commands: it interrupts every one, however it was started, and always as KeyboardInterrupt."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


def let_ctrl_c_through() -> None:
    """Take SIGINT as KeyboardInterrupt even when the process was started with it ignored.

    A command started as a background job of a script (`make run &`), under nohup, or by some CI runners
    inherits SIGINT ignored, and Python leaves an inherited SIG_IGN as it is: Ctrl-C would then do nothing,
    mid-seed or mid-run. The `tenk` entry point calls this once, before any command runs."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, with Ctrl-C always coming out as KeyboardInterrupt.

    asyncio.run turns Ctrl-C into the main task's cancellation, then back into KeyboardInterrupt, by
    counting interrupts; but it zeroes that count after installing its handler (CPython 3.11-3.13), so a
    Ctrl-C landing in between cancels the task and comes out as a bare CancelledError, a traceback
    instead of click's "Aborted!". Nothing else cancels a main task, so here that is an interruption."""
    try:
        return asyncio.run(main)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within the block, SIGTERM (a service manager, a CI runner) raises KeyboardInterrupt, as Ctrl-C does, so
    that both take the same clean way out. Only the main thread may set handlers; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
