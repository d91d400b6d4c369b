"""The highest id this process knows of, so that an id past it is a 404 without a read.

No item has an id above the highest one stored. A flood of random ids (nearly all of them far past
the table) would cost one Redis lookup, one Postgres read and a negative entry each; past the ceiling
it costs one `max(id)` read per `refresh_after_s` per process, whatever its size.

The ceiling only rises between reads: a write this process makes raises it (`raise_to`), as does every
invalidation from other processes. An item created while an invalidation was lost is seen once the
ceiling is next read: at most `refresh_after_s` later (the cache's `negative_ttl_s`, as long as a
missing id was already remembered as missing).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable

from tenk.platform.outages import POSTGRES_ERRORS
from tenk.platform.resilience import SingleFlight

logger = logging.getLogger("tenk.platform.readthrough.ceiling")


class IdCeiling:
    def __init__(
        self, read: Callable[[], Awaitable[int]], refresh_after_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._read = read
        self.refresh_after_s = refresh_after_s
        self._clock = clock
        self.highest = 0
        self._read_at = -math.inf
        self._known = False
        self._reads: SingleFlight[None, None] = SingleFlight()
        self.reads = 0  # for tests and operators: what a flood of ids past the table costs Postgres

    def raise_to(self, item_id: int) -> None:
        self.highest = max(self.highest, item_id)

    def expire(self) -> None:
        """Read it again before trusting it (invalidations may have been lost)."""
        self._read_at = -math.inf

    async def beyond(self, item_id: int) -> bool:
        """True when no item can have this id. False when one may, or when the ceiling could not be
        read: the ordinary read path then decides (and reports Postgres being down)."""
        if item_id <= self.highest:
            return False
        if self._clock() - self._read_at >= self.refresh_after_s:
            await self._reads.do(None, self._refresh)
        return self._known and item_id > self.highest

    async def _refresh(self) -> None:
        started = self._clock()
        try:
            highest = await self._read()
        except POSTGRES_ERRORS as exc:
            logger.debug("id ceiling not read: %s", exc)
            self._known = False
        else:
            self.reads += 1
            self.raise_to(highest)
            self._known = True
        # Tried again after the interval either way: an outage does not add a read to every request.
        self._read_at = started
