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
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable


class BreakerState(enum.IntEnum):
    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


class CircuitOpenError(Exception):
    def __init__(self, name: str, retry_after_s: float) -> None:
        super().__init__(f"circuit {name!r} is open")
        self.name = name
        self.retry_after_s = retry_after_s


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

    def try_acquire(self) -> bool:
        """May a call go ahead now? Every True must be paired with one `release`."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN:
            if self._clock() - self._opened_at < self.open_s:
                return False
            self._set(BreakerState.HALF_OPEN)
        if self._probe_in_flight:
            return False
        self._probe_in_flight = True
        return True

    def release(self, ok: bool) -> None:
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
