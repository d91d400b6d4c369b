"""What this process knows of a cache's writes: whether any item may have changed since a moment.

For caches of answers drawn from many items (search result pages over products), which no one item's
invalidation can target: such a page stays right for as long as no item has changed since its load
began. The cache's invalidation listener (`ReadCache.listen_for_invalidations`) reports here every
invalidation it applies, from any process, and whether it is subscribed at all. While it is not,
messages are lost, so nothing can be vouched for; when it subscribes again, everything before that
moment counts as changed.

Sound only for data read from the primary after the moment: a write committed before a load began
was visible to that load; one committed after it is published after its commit, so it reaches the
listener after the load began. A read replica may still hold the old row after the message arrives.
Callers bound what they keep anyway: a change that skips the outbox trigger (TRUNCATE, a seed into an
empty table) sends no message, and one published in the instant between SUBSCRIBE leaving and Redis
taking it is missed, as it is by the item LRU, which its own TTL bounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Changes:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._listening = False
        self._last_change = clock()

    def subscribed(self) -> None:
        """The listener is (again) receiving: what happened while it was not is unknown."""
        self._listening = True
        self._last_change = self.clock()

    def lost(self) -> None:
        self._listening = False

    def changed(self) -> None:
        self._last_change = self.clock()

    def unchanged_since(self, moment: float) -> bool:
        """Whether no item has changed since `moment` (a reading of `clock`), as far as is known."""
        return self._listening and self._last_change < moment
