"""Result pages kept per process, refreshed ahead of expiry.

A page lives `ttl_s`, or `quiet_ttl_s` while no product has changed since its load began
(`unchanged_since`, fed by the catalog's invalidation listener: `tenk.platform.readthrough.Changes`). A
page answers for every product, so no one product's invalidation can target it; but while none changes it stays
right, and a short TTL would only reload it for nothing. With 10,000 queries drawn evenly at 2,000 req/s
(the search-open-loop example) each page is asked for every 5 s, so with the TTL alone Postgres still
did much of its cache-off work (the example's "cache on, TTL only" rung against its "cache off" one:
docs/results/2026-11-29/search-open-loop/). A product write puts every page back on
`ttl_s`. Each page's quiet lifetime is drawn between half and all of `quiet_ttl_s`: a cold start loads
most pages within seconds, and with one lifetime they would all reach their refresh point together.

A page asked for in the last part of its lifetime is served from memory and reloaded in the
background, once, so a popular page is replaced before it expires and no request waits for its
reload. Without this every hot page expired at once every TTL and the requests behind it queued on
Postgres.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, NamedTuple, TypeVar

K = TypeVar("K", bound=Hashable)

# The shortest quiet lifetime, as a share of `quiet_ttl_s`. A cold start loads most pages within seconds
# of each other; with one lifetime their reloads would come due together, and again each lifetime after.
# Reloads cost more than their own Postgres time: in the open-loop example the client's p99 rose with
# the share of searches reloading in its window, while the app's own answers did not slow (fefbcc6's
# message has the figures).
QUIET_SPREAD = 0.5


class Page(NamedTuple):
    body: bytes
    refresh: bool  # past the refresh-ahead point: serve it, and reload it in the background


class ResultPages(Generic[K]):
    """A bounded LRU; `clock` is injectable so that tests step time instead of sleeping."""

    def __init__(
        self,
        max_items: int,
        ttl_s: float,
        refresh_ahead: float,
        clock: Callable[[], float] = time.monotonic,
        quiet_ttl_s: float = 0.0,
        unchanged_since: Callable[[float], bool] | None = None,
    ) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self.quiet_ttl_s = max(ttl_s, quiet_ttl_s)
        self.refresh_ahead = refresh_ahead
        self.clock = clock
        self.unchanged_since = unchanged_since
        # key -> (loaded_at, body, quiet lifetime)
        self._entries: OrderedDict[K, tuple[float, bytes, float]] = OrderedDict()
        self.writes = 0  # pages stored, for tests and operators: admission keeps one-off queries out

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> Page | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        loaded_at, body, quiet_lifetime = entry
        age = self.clock() - loaded_at
        lifetime = self.ttl_s
        if (
            age >= self.ttl_s * self.refresh_ahead
            and self.unchanged_since is not None
            and self.unchanged_since(loaded_at)
        ):
            lifetime = quiet_lifetime
        if age >= lifetime:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return Page(body, age >= lifetime * self.refresh_ahead)

    def put(self, key: K, body: bytes, loaded_at: float) -> None:
        """`loaded_at` is the clock reading taken before the load began: a page is never younger than its data."""
        self.writes += 1
        quiet_lifetime = max(self.ttl_s, self.quiet_ttl_s * random.uniform(QUIET_SPREAD, 1.0))
        self._entries[key] = (loaded_at, body, quiet_lifetime)
        self._entries.move_to_end(key)
        if len(self._entries) > self.max_items:
            self._entries.popitem(last=False)
