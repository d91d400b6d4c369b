"""CircuitBreaker permits: late answers from before a state change don't decide the probe's verdict."""

from __future__ import annotations

from tenk.resilience import BreakerState, CircuitBreaker


class FakeClock:
    """Time we move by hand (a value, not a mock of the breaker's behaviour)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _opened(clock: FakeClock) -> CircuitBreaker:
    breaker = CircuitBreaker("dep", failure_ratio=0.5, window_s=10, min_calls=2, open_s=5, clock=clock)
    for _ in range(2):
        permit = breaker.acquire()
        assert permit is not None
        breaker.release(ok=False, permit=permit)
    assert breaker.state is BreakerState.OPEN
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
    assert breaker.state is BreakerState.HALF_OPEN
    assert straggler is not None
    breaker.release(ok=True, permit=straggler)
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.acquire() is None
    breaker.release(ok=True, permit=probe)
    assert breaker.state is BreakerState.CLOSED


def test_a_late_failure_from_before_the_trip_does_not_reopen_a_half_open_breaker() -> None:
    clock = FakeClock()
    breaker = _opened(clock)
    clock.now += 6
    probe = breaker.acquire()
    assert probe is not None
    stale_failure = probe.__class__(probe.epoch - 1, probe=False)
    breaker.release(ok=False, permit=stale_failure)
    assert breaker.state is BreakerState.HALF_OPEN


def test_an_abandoned_probe_hands_its_turn_to_the_next_caller() -> None:
    clock = FakeClock()
    breaker = _opened(clock)
    clock.now += 6
    probe = breaker.acquire()
    assert probe is not None
    assert breaker.acquire() is None
    breaker.abandon(probe)
    assert breaker.state is BreakerState.HALF_OPEN
    second = breaker.acquire()
    assert second is not None
    assert second.probe
    breaker.release(ok=False, permit=second)
    assert breaker.state is BreakerState.OPEN


def test_calls_without_permits_keep_the_old_contract() -> None:
    clock = FakeClock()
    breaker = _opened(clock)
    assert not breaker.try_acquire()
    clock.now += 6
    assert breaker.try_acquire()
    assert not breaker.try_acquire()
    breaker.release(ok=True)
    assert breaker.state is BreakerState.CLOSED
