"""A circuit breaker that opens on a failure *ratio* and half-opens with exactly one probe.

Many breaker libraries let every caller that arrives after the cool-down through at once, which
re-floods a dependency that has only just come back. Here the first caller after the cool-down
becomes the probe; everyone else keeps failing fast until the probe reports.

    breaker = CircuitBreaker("redis", failure_ratio=0.5, window_s=10, min_calls=20, open_s=5)
    if not breaker.try_acquire():
        raise CircuitOpenError(breaker.name)
    try:
        result = await call()
    except Exception:
        breaker.release(ok=False)
        raise
    breaker.release(ok=True)

Calls that can outlive a state change (a slow upstream answering after the breaker opened) should
hold a `Permit`: a late answer from before the change is then ignored instead of being mistaken for
the probe's verdict, and a probe whose caller goes away can hand its turn back:

    permit = breaker.acquire()
    if permit is None:
        raise CircuitOpenError(breaker.name, breaker.retry_after_s())
    try:
        result = await call()
    except asyncio.CancelledError:
        breaker.abandon(permit)
        raise
    except Exception:
        breaker.release(ok=False, permit=permit)
        raise
    breaker.release(ok=True, permit=permit)
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


class BreakerState(enum.IntEnum):
    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


class CircuitOpenError(Exception):
    def __init__(self, name: str, retry_after_s: float) -> None:
        super().__init__(f"circuit {name!r} is open")
        self.name = name
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class Permit:
    """Leave to make one call: the breaker state it was granted in, and whether it is the probe."""

    epoch: int
    probe: bool


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        *,
        failure_ratio: float = 0.5,
        window_s: float = 10.0,
        min_calls: int = 20,
        open_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.failure_ratio = failure_ratio
        self.window_s = window_s
        self.min_calls = min_calls
        self.open_s = open_s
        self._clock = clock
        self.state = BreakerState.CLOSED
        self._opened_at = 0.0
        self._probe_in_flight = False
        # One bucket per whole second: [second, successes, failures].
        self._buckets: deque[list[int]] = deque()
        self.transitions = 0
        # Bumped on every state change; a Permit from an older epoch no longer counts.
        self._epoch = 0
        # Immutable, so one per epoch serves every call made while closed.
        self._closed_permit = Permit(0, probe=False)

    def acquire(self) -> Permit | None:
        """Leave for one call now, or None (fail fast). Pair each Permit with `release` or `abandon`."""
        if self.state is BreakerState.CLOSED:
            return self._closed_permit
        if self.state is BreakerState.OPEN:
            if self._clock() - self._opened_at < self.open_s:
                return None
            self._set(BreakerState.HALF_OPEN)
        if self._probe_in_flight:
            return None
        self._probe_in_flight = True
        return Permit(self._epoch, probe=True)

    def try_acquire(self) -> bool:
        """May a call go ahead now? Every True must be paired with one `release`."""
        return self.acquire() is not None

    def abandon(self, permit: Permit) -> None:
        """The call ended without an answer about the dependency (cancelled): judge nothing.

        An abandoned probe hands its turn to the next caller instead of leaving the breaker
        half-open forever.
        """
        if permit.probe and permit.epoch == self._epoch:
            self._probe_in_flight = False

    def release(self, ok: bool, permit: Permit | None = None) -> None:
        if permit is not None and permit.epoch != self._epoch:
            # Granted before the last state change: its outcome says nothing about the present.
            return
        if self.state is BreakerState.HALF_OPEN:
            self._probe_in_flight = False
            if ok:
                self._buckets.clear()
                self._set(BreakerState.CLOSED)
            else:
                self._trip()
            return
        if self.state is BreakerState.OPEN:
            return
        self._record(ok)
        if not ok and self._should_trip():
            self._trip()

    def retry_after_s(self) -> float:
        if self.state is BreakerState.OPEN:
            return max(0.0, self.open_s - (self._clock() - self._opened_at))
        return 0.0

    def _record(self, ok: bool) -> None:
        now = int(self._clock())
        if not self._buckets or self._buckets[-1][0] != now:
            self._buckets.append([now, 0, 0])
        self._buckets[-1][1 if ok else 2] += 1
        horizon = now - self.window_s
        while self._buckets and self._buckets[0][0] <= horizon:
            self._buckets.popleft()

    def _should_trip(self) -> bool:
        ok = sum(b[1] for b in self._buckets)
        failed = sum(b[2] for b in self._buckets)
        total = ok + failed
        return total >= self.min_calls and failed / total >= self.failure_ratio

    def _trip(self) -> None:
        self._opened_at = self._clock()
        self._set(BreakerState.OPEN)

    def _set(self, state: BreakerState) -> None:
        if state is not self.state:
            self.state = state
            self.transitions += 1
            self._epoch += 1
            self._closed_permit = Permit(self._epoch, probe=False)
