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
