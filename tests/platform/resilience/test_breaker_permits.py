"""CircuitBreaker permits: late answers from before a state change don't decide the probe's verdict."""

from __future__ import annotations

import asyncio

import pytest

from tenk.platform.resilience import BreakerState, CircuitBreaker


class FakeClock:
    """Time we move by hand (a value, not a mock of the breaker's behaviour)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def state(breaker: CircuitBreaker) -> BreakerState:
    """Read afresh: mypy would otherwise keep the state an earlier assert narrowed it to."""
    return breaker.state


def _opened(clock: FakeClock) -> CircuitBreaker:
    breaker = CircuitBreaker("dep", failure_ratio=0.5, window_s=10, min_calls=2, open_s=5, clock=clock)
    for _ in range(2):
        permit = breaker.acquire()
        assert permit is not None
        breaker.release(ok=False, permit=permit)
    assert state(breaker) is BreakerState.OPEN
    return breaker


def test_a_late_success_from_before_the_trip_does_not_close_a_half_open_breaker() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker("dep", failure_ratio=0.5, window_s=10, min_calls=2, open_s=5, clock=clock)
    straggler = breaker.acquire()
    for _ in range(2):
        permit = breaker.acquire()
        assert permit is not None
        breaker.release(ok=False, permit=permit)
    clock.now += 6
    probe = breaker.acquire()
    assert probe is not None
    assert probe.probe
    assert state(breaker) is BreakerState.HALF_OPEN
    assert straggler is not None
    breaker.release(ok=True, permit=straggler)
    assert state(breaker) is BreakerState.HALF_OPEN
    assert breaker.acquire() is None
    breaker.release(ok=True, permit=probe)
    assert state(breaker) is BreakerState.CLOSED


def test_a_late_failure_from_before_the_trip_does_not_reopen_a_half_open_breaker() -> None:
    clock = FakeClock()
    breaker = _opened(clock)
    clock.now += 6
    probe = breaker.acquire()
    assert probe is not None
    stale_failure = probe.__class__(probe.epoch - 1, probe=False)
    breaker.release(ok=False, permit=stale_failure)
    assert state(breaker) is BreakerState.HALF_OPEN


def test_an_abandoned_probe_hands_its_turn_to_the_next_caller() -> None:
    clock = FakeClock()
    breaker = _opened(clock)
    clock.now += 6
    probe = breaker.acquire()
    assert probe is not None
    assert breaker.acquire() is None
    breaker.abandon(probe)
    assert state(breaker) is BreakerState.HALF_OPEN
    second = breaker.acquire()
    assert second is not None
    assert second.probe
    breaker.release(ok=False, permit=second)
    assert state(breaker) is BreakerState.OPEN


class ThisDependencyDown(Exception):
    pass


class OtherDependencyDown(Exception):
    pass


def _is_ours(exc: BaseException) -> bool:
    return isinstance(exc, ThisDependencyDown)


def _half_open(clock: FakeClock) -> CircuitBreaker:
    breaker = _opened(clock)
    clock.now += 6
    return breaker


def test_a_probe_failing_on_another_dependency_hands_its_turn_on() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    probe = breaker.call(_is_ours)
    assert probe is not None
    with pytest.raises(OtherDependencyDown), probe:
        raise OtherDependencyDown
    assert state(breaker) is BreakerState.HALF_OPEN
    second = breaker.call(_is_ours)
    assert second is not None, "the probe slot leaked: the breaker would stay half-open forever"
    with second:
        pass
    assert state(breaker) is BreakerState.CLOSED


def test_a_cancelled_probe_hands_its_turn_on() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    probe = breaker.call(_is_ours)
    assert probe is not None
    with pytest.raises(asyncio.CancelledError), probe:
        raise asyncio.CancelledError
    assert breaker.call(_is_ours) is not None


def test_a_probe_failing_on_its_own_dependency_reopens_the_breaker() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    probe = breaker.call(_is_ours)
    assert probe is not None
    with pytest.raises(ThisDependencyDown), probe:
        raise ThisDependencyDown
    assert state(breaker) is BreakerState.OPEN
    assert breaker.call(_is_ours) is None


def test_an_explicit_verdict_is_final() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    probe = breaker.call(_is_ours)
    assert probe is not None

    def call_failing_with_a_returned_verdict() -> None:
        with probe:
            probe.failed()
            raise OtherDependencyDown

    with pytest.raises(OtherDependencyDown):
        call_failing_with_a_returned_verdict()
    assert state(breaker) is BreakerState.OPEN


def test_other_dependencies_errors_do_not_trip_a_closed_breaker() -> None:
    breaker = CircuitBreaker("dep", failure_ratio=0.5, window_s=10, min_calls=2, open_s=5, clock=FakeClock())
    for _ in range(10):
        call = breaker.call(_is_ours)
        assert call is not None
        with pytest.raises(OtherDependencyDown), call:
            raise OtherDependencyDown
    assert state(breaker) is BreakerState.CLOSED
