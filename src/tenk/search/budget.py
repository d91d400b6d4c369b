"""A budget of Postgres statements per anonymous client, so that one client cannot take search's share.

Search is public by default, and a query that misses the cache costs Postgres a ranking statement (a
new spelling, one more to normalise it). The bulkhead caps how many run at once per process, but one
client hammering unique queries would hold every slot, and the CPU it burns in Postgres is taken from
every other route. Each client address gets a token bucket: a statement takes a token, tokens come
back at `rate` a second up to `burst`, and a search that finds the bucket empty is refused (429,
Retry-After) before it reaches Postgres. Cached pages cost nothing.

Many clients, each within its own budget, could still fill every search slot together. So anonymous
searches also share a budget of Postgres time (`SharedTime`): each of their statements spends its wall
time, which comes back at `share` seconds a second; while it is spent, anonymous searches that need
Postgres are refused too. Wall time, not CPU time: under contention a statement takes longer, so the
budget tightens exactly when Postgres is busy. (One client can then keep other anonymous clients out;
clients with a key, and cached pages, are never refused.)

Callers presenting an accepted API key are not counted. IPv6 clients are counted by their /64, the
block one host is usually given. The buckets are per process and bounded (least recently seen
forgotten first, which only ever gives a client a full bucket back).
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from tenk.platform import TenkError

MAX_CLIENTS = 100_000


class SearchBudgetError(TenkError):
    status, code = 429, "too_many_requests"

    def __init__(
        self,
        retry_after_s: float,
        message: str = "too many searches reach the database from this address; retry later, or send an API key",
    ) -> None:
        super().__init__(message, retry_after_s=retry_after_s)


class SharedTime:
    """Seconds of Postgres statement time that anonymous searches may spend together: `share` of them come
    back every second, up to one second's worth. `clock` is injectable so that tests step time."""

    def __init__(self, share: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.share = share
        self.clock = clock
        self._level = share
        self._at = clock()
        self.refusals = 0

    def admit(self) -> None:
        """Raise SearchBudgetError while the time is spent (the last statements may have overdrawn it)."""
        if self.share <= 0:
            return
        self._refill()
        if self._level <= 0:
            self.refusals += 1
            raise SearchBudgetError(
                retry_after_s=max(1, math.ceil(-self._level / self.share)),
                message="searches without an API key have used their share of the database; retry later, "
                "or send an API key",
            )

    def spend(self, seconds: float) -> None:
        if self.share <= 0:
            return
        self._refill()
        self._level -= seconds

    def _refill(self) -> None:
        now = self.clock()
        self._level = min(self.share, self._level + (now - self._at) * self.share)
        self._at = now


def client_key(address: str) -> str:
    """The bucket an address draws from: itself, or its /64 for IPv6."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class ClientBudget:
    """`clock` is injectable so that tests step time instead of sleeping."""

    def __init__(
        self, rate: float, burst: int, max_clients: int = MAX_CLIENTS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, when)
        self.refusals = 0

    def charge(self, client: str | None, statements: int = 1) -> None:
        """Take `statements` tokens from the client's bucket, or raise SearchBudgetError. None: not counted."""
        if client is None or self.rate <= 0:
            return
        now = self.clock()
        tokens, then = self._buckets.get(client, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens < statements:
            self.refusals += 1
            self._remember(client, tokens, now)
            raise SearchBudgetError(retry_after_s=math.ceil((statements - tokens) / self.rate))
        self._remember(client, tokens - statements, now)

    def _remember(self, client: str, tokens: float, now: float) -> None:
        self._buckets[client] = (tokens, now)
        self._buckets.move_to_end(client)
        if len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
