"""The one way a test waits for something: poll a check until it holds, or fail naming what never came.

Deadlines are generous and come from measurements (each caller says which): a busy machine stretches
every step, and a wait that ends early costs nothing. Never a sleep standing in for synchronisation.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T] | T], within: float, what: str, every: float = 0.1) -> T:
    """Call `check` (sync or async) until it returns something truthy, and return that; after `within`
    seconds, fail with `what` and the last value seen."""
    deadline = time.monotonic() + within
    while True:
        outcome = check()
        last = await outcome if inspect.isawaitable(outcome) else outcome
        if last:
            return last  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(every)


def eventually_blocking(check: Callable[[], T], within: float, what: str, every: float = 0.1) -> T:
    """`eventually` for a synchronous test (no event loop running)."""
    return asyncio.run(eventually(check, within, what, every))
