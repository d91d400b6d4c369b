"""How long the suite waits for something, derived from what this machine measured in this session.

A server's start is the session's yardstick: it does a little of everything a test waits on (fork and
exec, imports, sockets, Postgres and Redis round trips), so a machine that stretched one start
stretches the rest alike. Every wait is granted the larger of a floor and a multiple of the slowest
start measured so far. The floor covers a wait before any start was measured, and an idle machine, on
which a server listens within seconds; the multiple covers a machine slower than the floor assumed
(both cores loaded, other suites sharing them), so a deadline grows with the load instead of failing.
A wait that ends early costs nothing, so only a wait that never ends pays the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

# Generous: idle, a server listens within seconds, and a shared 2-core machine slows that several-fold.
FLOOR_S = 60.0
# Each wait in the suite is a few steps of the kind a start is made of; five starts cover any of them.
STARTS_PER_WAIT = 5

_slowest_start_s = 0.0


def record_start(seconds: float) -> None:
    """Count a measured start (a server, an embedded Postgres or Redis) toward later deadlines."""
    global _slowest_start_s
    _slowest_start_s = max(_slowest_start_s, seconds)


@contextmanager
def timed_start() -> Iterator[None]:
    """Time the start in the block and `record_start` it, if it succeeds (a failed one measured nothing)."""
    started = time.monotonic()
    yield
    record_start(time.monotonic() - started)


def deadline_s() -> float:
    """Seconds a test may wait for a start, or for anything else to happen, on this machine now."""
    return max(FLOOR_S, STARTS_PER_WAIT * _slowest_start_s)
