"""`tenk.platform.turn_batch.TurnBatch`: calls that join a leader are answered by its batch, and are never left
waiting when the leader cannot make it."""

from __future__ import annotations

import asyncio

import pytest

from tenk.platform.turn_batch import TurnBatch


class Doubler:
    """Answers twice the key; `release` lets its calls finish, so a test decides when one is in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.batches: list[list[int]] = []
        self.sizes: list[int] = []
        self.batch = TurnBatch(self.one, self.many, self.sizes.append)

    async def one(self, key: int) -> int:
        await self.release.wait()
        return 2 * key

    async def many(self, keys: list[int]) -> dict[int, int]:
        self.batches.append(keys)
        await self.release.wait()
        return {key: 2 * key for key in keys}


async def test_calls_started_while_one_is_in_flight_go_out_together() -> None:
    doubler = Doubler()
    first = asyncio.create_task(doubler.batch.get(1))
    await asyncio.sleep(0)  # the first call is in flight, alone
    rest = [asyncio.create_task(doubler.batch.get(key)) for key in (2, 3, 3, 4)]
    await asyncio.sleep(0)
    doubler.release.set()
    assert await first == 2
    assert [await task for task in rest] == [4, 6, 6, 8]
    assert doubler.batches == [[2, 3, 4]]
    assert doubler.sizes == [3]


async def test_callers_joined_to_a_cancelled_leader_are_cancelled_too_not_left_waiting() -> None:
    doubler = Doubler()
    first = asyncio.create_task(doubler.batch.get(1))
    await asyncio.sleep(0)
    # Both start in the next turn: the leader yields it, the other joins; the leader is cancelled before
    # its turn comes back.
    leader = asyncio.create_task(doubler.batch.get(2))
    joined = asyncio.create_task(doubler.batch.get(3))
    await asyncio.sleep(0)
    leader.cancel()
    doubler.release.set()
    assert await first == 2
    with pytest.raises(asyncio.CancelledError):
        await leader
    # Bounded only so that a broken batch fails the test instead of hanging it.
    done, _ = await asyncio.wait([joined], timeout=30)
    assert joined in done
    assert joined.cancelled()
