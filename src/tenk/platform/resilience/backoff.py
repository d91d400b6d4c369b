"""Exponential backoff: the delay between retries doubles from `first_s` up to `max_s`.

One object per retrying loop, so that every loop backs off the same way and a success can start it
over (`reset`); the loops themselves stay plain `while`s, since each decides differently what is
retried, what is given up on and what counts as success.
"""

from __future__ import annotations

import asyncio


class Backoff:
    def __init__(self, first_s: float, max_s: float) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.upcoming_s = first_s

    def next_delay(self) -> float:
        """The delay to wait now; the one after it is twice as long, up to `max_s`."""
        delay = self.upcoming_s
        self.upcoming_s = min(delay * 2, self.max_s)
        return delay

    async def sleep(self) -> None:
        await asyncio.sleep(self.next_delay())

    def reset(self) -> None:
        """After a success: the next failure waits only `first_s` again."""
        self.upcoming_s = self.first_s
