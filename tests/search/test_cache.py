from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import asyncpg
import orjson

from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.platform.readthrough import Changes
from tenk.search.pages import ResultPages
from tenk.search.queries import RANK_CANDIDATES, RANK_ONE_WORD
from tenk.search.service import SearchService
from tenk.search.settings import SearchSettings
from tenk.stack.seed import VOCABULARY
from tests.support.waiting import eventually


class SteppedClock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def _counted_pool(stack: Stack, statements: list[str]) -> asyncpg.Pool:
    async def record(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda record: statements.append(record.query))

    pool: asyncpg.Pool = await asyncpg.create_pool(stack.pg.url, min_size=2, max_size=8, init=record)
    return pool


def _searches(statements: list[str]) -> int:
    """Result pages loaded from Postgres (each load runs one ranking statement once)."""
    return statements.count(RANK_CANDIDATES) + statements.count(RANK_ONE_WORD)


async def test_identical_concurrent_searches_of_a_query_seen_before_share_one_query_and_then_hit_the_cache(
    stack: Stack,
) -> None:
    statements: list[str] = []
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings())
        first = await service.search("lamp", 10)  # first sighting: answered, not cached
        pages = await asyncio.gather(*(service.search("lamp", 10) for _ in range(50)))
        assert set(pages) == {first}
        await service.search("lamp", 10)
        assert _searches(statements) == 2
        await service.search("lamp", 11)  # another page size is another query
        await service.search("lamp", 11)
        assert _searches(statements) == 4
    finally:
        await pool.close()


async def test_with_the_cache_off_every_search_reaches_postgres(stack: Stack) -> None:
    statements: list[str] = []
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings(cache=False))
        for _ in range(3):
            await service.search("kettle", 5)
        assert _searches(statements) == 3
    finally:
        await pool.close()


async def test_a_hot_page_is_refreshed_once_ahead_of_expiry_and_no_request_waits_for_it(stack: Stack) -> None:
    statements: list[str] = []
    clock = SteppedClock()
    pool = await _counted_pool(stack, statements)
    blocker = await asyncpg.connect(stack.pg.url)
    try:
        settings = SearchSettings(cache_ttl_s=10.0, cache_refresh_ahead=0.8)
        service = SearchService(pool, settings, clock=clock)
        await service.search("lamp", 10)  # first sighting: not cached
        first = await service.search("lamp", 10)
        assert _searches(statements) == 2
        assert service.pages is not None
        assert service.pages.writes == 1

        clock.now += 7.9  # still fresh: served from memory, nothing reloaded
        assert await service.search("lamp", 10) == first
        assert _searches(statements) == 2
        assert service.refreshes == 0

        clock.now += 0.2  # past the refresh-ahead point: 50 requests, one background reload
        pages = await asyncio.gather(*(service.search("lamp", 10) for _ in range(50)))
        assert set(pages) == {first}
        assert service.refreshes == 1
        pages_kept = service.pages
        await eventually(
            lambda: pages_kept.writes == 2 and not service.loads, 30, "the background reload to be kept", every=0.01
        )
        assert _searches(statements) == 3

        # Past the first load's expiry: the page was replaced ahead of it, so with Postgres unable to
        # answer (products locked) the request is still served from memory at once.
        clock.now += 2.0
        await blocker.execute("BEGIN; LOCK TABLE products IN ACCESS EXCLUSIVE MODE")
        assert await asyncio.wait_for(service.search("lamp", 10), timeout=10) == first
        await blocker.execute("ROLLBACK")
        assert _searches(statements) == 3
    finally:
        await blocker.close()
        await pool.close()


async def test_a_page_nobody_asked_for_near_expiry_expires_and_reloads_once(stack: Stack) -> None:
    statements: list[str] = []
    clock = SteppedClock()
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings(cache_ttl_s=10.0), clock=clock)
        await service.search("kettle", 10)
        await service.search("kettle", 10)
        clock.now += 10.0
        await asyncio.gather(*(service.search("kettle", 10) for _ in range(20)))
        assert _searches(statements) == 3
        assert service.refreshes == 0
    finally:
        await pool.close()


async def test_a_query_never_repeated_is_answered_from_postgres_and_never_written_to_the_cache(stack: Stack) -> None:
    statements: list[str] = []
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings(cache_max_items=50))
        queries = [*VOCABULARY[:120], *(f"{a} {b}" for a, b in zip(VOCABULARY[:60], VOCABULARY[60:120], strict=True))]
        for query in queries:
            body = orjson.loads(await service.search(query, 5))
            assert body["query"] == query
        assert _searches(statements) == len(queries)
        assert service.pages is not None
        assert service.pages.writes == 0
        assert len(service.pages) == 0
        assert service.loads.calls == 0  # not even a single-flight task
        await service.search(queries[0], 5)  # its second sighting (within the window): admitted
        assert service.pages.writes == 1
    finally:
        await pool.close()


async def test_pages_due_for_refresh_together_reload_on_at_most_half_the_slots_and_never_queue_a_miss(
    stack: Stack,
) -> None:
    statements: list[str] = []
    clock = SteppedClock()
    pool = await _counted_pool(stack, statements)
    try:
        service = SearchService(pool, SearchSettings(cache_ttl_s=10.0, max_inflight=4), clock=clock)
        words = VOCABULARY[:12]
        for word in [*words, *words]:  # seen twice: cached
            await service.search(word, 10)
        assert service.pages is not None
        assert service.pages.writes == len(words)

        clock.now += 9.0  # every page past its refresh point at once, as after a cold start
        await asyncio.gather(*(service.search(word, 10) for word in words))
        assert service.refreshes == 2  # half of the 4 slots; the other pages wait for a later request
        assert service.bulkhead.inflight <= 2
        await eventually(lambda: not service._refreshes, deadline_s(), "the background refreshes to end", every=0.01)

        await asyncio.gather(*(service.search(word, 10) for word in words))
        assert service.refreshes == 4  # the next requests start the next reloads, still two at a time
    finally:
        await pool.close()


class Quiet(NamedTuple):
    """A service whose pages outlive their TTL while `changes` says no product changed."""

    service: SearchService
    clock: SteppedClock
    changes: Changes
    statements: list[str]


@asynccontextmanager
async def _quiet_service(stack: Stack) -> AsyncIterator[Quiet]:
    statements: list[str] = []
    clock = SteppedClock()
    changes = Changes(clock)
    changes.subscribed()
    clock.now += 1.0  # pages load after the listener subscribed
    pool = await _counted_pool(stack, statements)
    try:
        settings = SearchSettings(cache_ttl_s=10.0, cache_quiet_ttl_s=60.0, cache_refresh_ahead=0.8)
        yield Quiet(SearchService(pool, settings, clock=clock, changes=changes), clock, changes, statements)
    finally:
        await pool.close()


async def test_a_page_outlives_its_ttl_while_no_product_changes_until_its_quiet_ttl(stack: Stack) -> None:
    async with _quiet_service(stack) as (service, clock, _, statements):
        await service.search("kettle", 10)
        await service.search("kettle", 10)  # second sighting: loaded and kept
        assert _searches(statements) == 2
        clock.now += 20.0  # two TTLs, no product changed, short of any quiet refresh point (0.8 x 30 s)
        await service.search("kettle", 10)
        assert (_searches(statements), service.refreshes) == (2, 0)
        clock.now += 41.0  # past the longest quiet lifetime (60 s): loaded again
        await service.search("kettle", 10)
        assert _searches(statements) == 3


def test_the_quiet_lifetimes_of_pages_loaded_together_spread_over_half_the_quiet_ttl() -> None:
    clock = SteppedClock()
    pages: ResultPages[int] = ResultPages(1_000, 10.0, 0.8, clock, quiet_ttl_s=60.0, unchanged_since=lambda _: True)
    for key in range(200):
        pages.put(key, b"[]", clock.now)
    clock.now += 29.0
    assert all(pages.get(key) is not None for key in range(200)), "none before half the quiet TTL"
    clock.now += 16.0
    kept = [key for key in range(200) if pages.get(key) is not None]
    assert 0 < len(kept) < 200, "at 45 s, some gone and some kept"
    clock.now += 15.0
    assert all(pages.get(key) is None for key in kept), "none past the quiet TTL"


async def test_a_product_change_puts_every_page_loaded_before_it_back_on_its_ttl(stack: Stack) -> None:
    async with _quiet_service(stack) as (service, clock, changes, statements):
        await service.search("kettle", 10)
        await service.search("kettle", 10)
        clock.now += 5.0
        changes.changed()
        clock.now += 1.0
        await service.search("lamp", 10)
        await service.search("lamp", 10)  # loaded after the change
        clock.now += 5.0  # kettle 11 s old, loaded before the change: expired
        await service.search("kettle", 10)
        assert _searches(statements) == 5
        # lamp 20 s old: past its TTL, loaded after the change and none since, so on its quiet lifetime
        # (drawn from 30-60 s) and short of the earliest quiet refresh point (0.8 x 30 s)
        clock.now += 15.0
        await service.search("lamp", 10)
        assert (_searches(statements), service.refreshes) == (5, 0)


async def test_while_the_listener_is_not_subscribed_a_page_lives_its_ttl(stack: Stack) -> None:
    async with _quiet_service(stack) as (service, clock, changes, statements):
        await service.search("kettle", 10)
        await service.search("kettle", 10)
        changes.lost()  # messages sent now would be lost: nothing can be vouched for
        clock.now += 11.0
        await service.search("kettle", 10)
        assert _searches(statements) == 3
