"""A circuit breaker that opens on a failure *ratio* and half-opens with exactly one probe.

Many breaker libraries let every caller that arrives after the cool-down through at once, which
re-floods a dependency that has only just come back. Here the first caller after the cool-down
becomes the probe; everyone else keeps failing fast until the probe reports.

Invariant: every permit is settled exactly once, on every exit path. A probe whose verdict is never
reported leaves the breaker half-open for the life of the process, with every caller failing fast.
`call()` makes that structural: the permit is settled when the `with` block is left, however it is
left, and only exceptions the caller's classifier attributes to *this* dependency count against it:

    call = breaker.call(is_failure=redis_is_down)
    if call is None:
        raise CircuitOpenError(breaker.name, breaker.retry_after_s())
    with call:
        result = await redis.get(key)

Leaving the block normally is a success; an exception `is_failure` accepts is a failure; any other
exception (cancellation, a bug, another dependency's error) says nothing about this dependency and
hands the permit back unjudged. Inside the block `call.ok()` / `call.failed()` decide explicitly,
for verdicts that are not exceptions (an HTTP 500 that was returned, not raised).

Permits carry the breaker state they were granted in: a late answer from before a state change (a
slow upstream answering after the breaker opened) is ignored instead of being mistaken for the
probe's verdict.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType


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


class BreakerCall:
    """One call's permit, settled exactly once (see the module docstring)."""

    __slots__ = ("_breaker", "_is_failure", "_settled", "permit")

    def __init__(self, breaker: CircuitBreaker, permit: Permit, is_failure: Callable[[BaseException], bool]) -> None:
        self._breaker = breaker
        self._is_failure = is_failure
        self._settled = False
        self.permit = permit

    def ok(self) -> None:
        if not self._settled:
            self._settled = True
            self._breaker.release(ok=True, permit=self.permit)

    def failed(self) -> None:
        if not self._settled:
            self._settled = True
            self._breaker.release(ok=False, permit=self.permit)

    def abandon(self) -> None:
        if not self._settled:
            self._settled = True
            self._breaker.abandon(self.permit)

    def __enter__(self) -> BreakerCall:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.ok()
        elif self._is_failure(exc):
            self.failed()
        else:
            self.abandon()


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

    def call(self, is_failure: Callable[[BaseException], bool]) -> BreakerCall | None:
        """A permit for one call as a context manager, or None (fail fast). See the module docstring."""
        permit = self.acquire()
        return None if permit is None else BreakerCall(self, permit, is_failure)

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
