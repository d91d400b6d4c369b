"""The one way a test waits for something: poll a check until it holds, or fail naming what never came.

Deadlines are generous and come from measurements (each caller says which): a busy machine stretches
every step, and a wait that ends early costs nothing. Never a sleep standing in for synchronisation.

A check may assert as well, to fail at once on what the wait must never see (a process gone, an old
row coming back). `what` names what is awaited ("the backlog to drain"); it may be a function, called
only on failure, for a message that reads state then (a log's tail).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeGuard, TypeVar, overload

T = TypeVar("T")


class _Deadline:
    """The one rule both waits follow: a truthy value ends the wait; past `within`, it fails."""

    def __init__(self, within: float, what: str | Callable[[], str]) -> None:
        self.within, self.what = within, what
        self.at = time.monotonic() + within

    def reached(self, last: T | None) -> TypeGuard[T]:
        if last:
            return True
        if time.monotonic() >= self.at:
            said = self.what() if callable(self.what) else self.what
            raise AssertionError(f"timed out after {self.within}s waiting for {said} (last: {last!r})")
        return False


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]], within: float, what: str | Callable[[], str], every: float = 0.1
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | None], within: float, what: str | Callable[[], str], every: float = 0.1
) -> T: ...


async def eventually(
    check: Callable[[], Awaitable[T | None]] | Callable[[], T | None],
    within: float,
    what: str | Callable[[], str],
    every: float = 0.1,
) -> T:
    """Call `check` (sync or async) until it returns something truthy, and return that; after `within`
    seconds, fail with `what` and the last value seen. The value returned is never None: a check may
    return `X | None` and its caller gets an `X`."""
    deadline = _Deadline(within, what)
    while True:
        outcome = check()
        last: T | None = await outcome if inspect.isawaitable(outcome) else outcome
        if deadline.reached(last):
            return last
        await asyncio.sleep(every)


def eventually_blocking(
    check: Callable[[], T | None], within: float, what: str | Callable[[], str], every: float = 0.1
) -> T:
    """`eventually` for synchronous code: it blocks the thread, and so any event loop running in it
    (a sync helper called from an async test waits as a blocking call would)."""
    deadline = _Deadline(within, what)
    while True:
        last = check()
        if deadline.reached(last):
            return last
        time.sleep(every)
