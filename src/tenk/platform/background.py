"""Background tasks owned by a lifespan or a long-lived object."""

from __future__ import annotations

import asyncio
from contextlib import suppress


async def cancel_and_wait(task: asyncio.Task[object] | None) -> None:
    """Cancel `task` and wait until it has finished unwinding (its `finally` blocks have run)."""
    if task is None:
        return
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task


def raise_if_cancelled() -> None:
    """Raise CancelledError if this task has been cancelled; call it once per turn of a forever-loop.

    A library can swallow a cancellation (redis-py can, when it lands mid-command, and on Python 3.11
    one that races a timeout surfaces as TimeoutError, which a retry loop catching OSError swallows).
    The loop then runs on, and `cancel_and_wait` waits for ever; the task's cancel count still says.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
