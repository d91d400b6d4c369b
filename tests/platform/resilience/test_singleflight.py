from __future__ import annotations

import asyncio

from tenk.platform.resilience import SingleFlight


async def test_a_call_after_forget_starts_its_own_and_keeps_its_entry() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    release_first = asyncio.Event()
    first_started = asyncio.Event()

    async def held_first() -> int:
        first_started.set()
        await release_first.wait()
        return 1

    first = asyncio.create_task(flights.do("k", held_first))
    await first_started.wait()
    flights.forget("k")
    second_started = asyncio.Event()

    async def held_second() -> int:
        second_started.set()
        await asyncio.Event().wait()
        return 0

    second = asyncio.create_task(flights.do("k", held_second))
    await second_started.wait()
    release_first.set()
    assert await first == 1
    # The forgotten call's end must not drop the entry of the call that replaced it.
    assert "k" in flights
    assert flights.calls == 2
    second.cancel()


async def test_an_inline_call_runs_in_its_callers_task() -> None:
    flights: SingleFlight[str, asyncio.Task[object] | None] = SingleFlight(own_task=False)

    async def whose_task() -> asyncio.Task[object] | None:
        return asyncio.current_task()

    assert await flights.do("k", whose_task) is asyncio.current_task()
    assert "k" not in flights


async def test_an_inline_call_is_shared_by_the_callers_that_join_it() -> None:
    flights: SingleFlight[str, int] = SingleFlight(own_task=False)
    started, release = asyncio.Event(), asyncio.Event()

    async def held() -> int:
        started.set()
        await release.wait()
        return 7

    # All three start in one turn: the first leads and sets `started`; the others join before this resumes.
    callers = [asyncio.create_task(flights.do("k", held)) for _ in range(3)]
    await started.wait()
    release.set()
    assert await asyncio.gather(*callers) == [7, 7, 7]
    assert flights.calls == 1


async def test_when_an_inline_leader_is_cancelled_a_waiting_caller_calls_again_and_is_answered() -> None:
    flights: SingleFlight[str, int] = SingleFlight(own_task=False)
    started = asyncio.Event()

    async def held_first() -> int:
        started.set()
        await asyncio.Event().wait()
        return 1

    async def answered() -> int:
        return 2

    leader = asyncio.create_task(flights.do("k", held_first))
    waiting = asyncio.create_task(flights.do("k", answered))
    await started.wait()  # the leader holds the call, and the other caller waits on it
    leader.cancel()
    assert await waiting == 2  # its own call, not the leader's cancellation
    assert leader.cancelled()
    assert flights.calls == 2
    assert "k" not in flights


async def test_an_inline_calls_failure_reaches_every_caller() -> None:
    flights: SingleFlight[str, int] = SingleFlight(own_task=False)
    started, release = asyncio.Event(), asyncio.Event()

    async def failing() -> int:
        started.set()
        await release.wait()
        raise LookupError("gone")

    callers = [asyncio.create_task(flights.do("k", failing)) for _ in range(2)]
    await started.wait()
    release.set()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)
    assert [type(outcome) for outcome in outcomes] == [LookupError, LookupError]
    assert flights.calls == 1
