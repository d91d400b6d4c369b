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
