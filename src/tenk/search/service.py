"""Ranked full-text search, with a per-process cache of result pages and a cap on Postgres use.

A query reaches Postgres through its own small pool behind a bulkhead, with a statement timeout:
search traffic that Postgres cannot keep up with is shed (503, Retry-After) instead of taking the
connections that tasks, catalog misses and writes need. Result pages tolerate seconds of staleness
after a product write, and live longer while no product changes (`tenk.search.pages`), so repeated
queries are answered from memory and pages are refreshed ahead of expiry. A query is
cached only from its second sighting (`admission.Doorkeeper`): a never-repeated one goes straight to
Postgres, as with the cache off, with no cache write and no single-flight task. Loads of admitted
queries go through single-flight, so concurrent identical queries share one Postgres call.

Pages are keyed by the query's normalised form, so every spelling of a query shares one
(`tenk.search.spelling`); a query that can match nothing worth ranking is answered at once. Searches
without an API key have budgets (`tenk.search.budget`): statements per client, and a share of Postgres
time for all of them together; cached pages are free.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import asyncpg
import orjson
from fastapi import FastAPI

from tenk.platform import (
    Bulkhead,
    BulkheadFullError,
    SingleFlight,
    UnavailableError,
    create_pg_pool,
    pg_pool_options,
    postgres_is_down,
)
from tenk.platform.readthrough import Changes
from tenk.search import metrics, spelling
from tenk.search.admission import Doorkeeper
from tenk.search.budget import ClientBudget, SharedTime
from tenk.search.pages import ResultPages
from tenk.search.queries import (
    NORMALISE,
    ONE_WORD,
    RANK_CANDIDATES,
    RANK_ONE_WORD,
    candidates_for,
)
from tenk.search.settings import SearchSettings

logger = logging.getLogger("tenk.search.service")

_T = TypeVar("_T")

PageKey = tuple[str, int]  # (normalised query, limit)
ADMISSION_WINDOW_PAGES = 4
NO_ITEMS = b"[]"


class SearchTimeoutError(UnavailableError):
    def __init__(self) -> None:
        super().__init__("the search took too long; try again or narrow the query", retry_after_s=1.0)


class SearchService:
    def __init__(
        self,
        pg: asyncpg.Pool,
        settings: SearchSettings,
        clock: Callable[[], float] = time.monotonic,
        timeout_per_transaction: bool = False,
        changes: Changes | None = None,
    ) -> None:
        """`changes`: what this process knows of product changes, on `clock`; pages outlive `cache_ttl_s`
        only with it (None when the pages are read from a replica, which may lag the news)."""
        self.pg = pg
        self.settings = settings
        # Behind a transaction pooler the statement timeout cannot be a connection setting (PgBouncer
        # refuses it at start-up, and a session SET would leak to other clients): SET LOCAL it per query.
        self.timeout_per_transaction = timeout_per_transaction
        self.clock = clock
        self.bulkhead = Bulkhead("search", settings.max_inflight, settings.max_wait_s)
        self.pages: ResultPages[PageKey] | None = (
            ResultPages(
                settings.cache_max_items,
                settings.cache_ttl_s,
                settings.cache_refresh_ahead,
                clock,
                quiet_ttl_s=settings.cache_quiet_ttl_s,
                unchanged_since=changes.unchanged_since if changes is not None else None,
            )
            if settings.cache
            else None
        )
        # A query is remembered for one to two windows of distinct queries; a few times the pages kept, so
        # that a query repeated while its page would still be in the LRU is admitted.
        self.doorkeeper = Doorkeeper(ADMISSION_WINDOW_PAGES * settings.cache_max_items)
        self.loads: SingleFlight[PageKey, bytes] = SingleFlight()
        self.budget = ClientBudget(settings.client_rate, settings.client_burst, clock=clock)
        self.anonymous_time = SharedTime(settings.anonymous_db_share, clock=clock)
        # Spelling -> normalised key; a query's normal form never changes, so they are kept until evicted.
        self._spellings: OrderedDict[str, str] = OrderedDict()
        self.normalisations = 0  # round trips to normalise a new spelling
        self._refreshes: dict[PageKey, asyncio.Task[None]] = {}  # at most one background reload per page
        self.full_rankings = 0  # queries the candidate set could not answer alone
        self.refreshes = 0  # background reloads started ahead of expiry

    async def search(self, query: str, limit: int, client: str | None = None) -> bytes:
        """The response body for one query: `{"query": ..., "items": [...]}`. `client` is the budget its
        Postgres statements are charged to (None: not counted)."""
        items = await self._items(query, limit, client)
        return b'{"query":' + orjson.dumps(query) + b',"items":' + items + b"}"

    async def _items(self, query: str, limit: int, client: str | None) -> bytes:
        normal = await self._normalised(query, client)
        if normal == spelling.NOTHING:
            return NO_ITEMS
        key = (normal, limit)
        if self.pages is None:
            self._charge(client)
            return await self._fetch(query, limit, client)
        page = self.pages.get(key)
        if page is not None:
            if page.refresh and key not in self._refreshes and key not in self.loads and self._refresh_capacity():
                self._refresh_in_background(key, query)
            return page.body
        if key in self.loads:
            return await self.loads.do(key, lambda: self._load(key, query))  # joins a load: no statement of its own
        self._charge(client)
        if not self.doorkeeper.seen_before(key):
            return await self._fetch(query, limit, client)
        return await self.loads.do(key, lambda: self._load(key, query, client))

    def _charge(self, client: str | None) -> None:
        """Before a statement of an anonymous search: the shared time first (a refusal there takes none of
        the client's own tokens), then the client's budget (`tenk.search.budget`)."""
        if client is not None:
            self.anonymous_time.admit()
            self.budget.charge(client)

    async def _normalised(self, query: str, client: str | None) -> str:
        """The query's page key (`tenk.search.spelling`): from memory for a spelling seen before, else a word's
        own, else one round trip to Postgres."""
        normal = self._spellings.get(query)
        if normal is not None:
            self._spellings.move_to_end(query)
            return normal
        if ONE_WORD.fullmatch(query):
            return spelling.word_key(query)
        self._charge(client)
        self.normalisations += 1
        async with self.bulkhead.slot():
            tsquery, tree = await self._in_postgres(lambda conn: conn.fetchrow(NORMALISE, query), client)
        normal = spelling.tsquery_key(tsquery, tree)
        self._spellings[query] = normal
        if len(self._spellings) > ADMISSION_WINDOW_PAGES * self.settings.cache_max_items:
            self._spellings.popitem(last=False)
        return normal

    def _refresh_capacity(self) -> bool:
        """Whether a background reload may start now: it takes only a free slot, and reloads hold at most half.

        Pages loaded together reach their refresh point together (a cold start's pages, eight seconds later);
        uncapped, their reloads would all queue for the search slots at once, ahead of the requests that
        missed the cache. A page whose reload is not started now is served as it is, and its next request
        tries again; one that expires first is loaded by the request that finds it gone.
        """
        refreshing_at_most = max(1, self.bulkhead.max_inflight // 2)
        return len(self._refreshes) < refreshing_at_most and self.bulkhead.inflight < self.bulkhead.max_inflight

    def _refresh_in_background(self, key: PageKey, query: str) -> None:
        self.refreshes += 1
        task = asyncio.get_running_loop().create_task(self._refresh(key, query))
        self._refreshes[key] = task
        task.add_done_callback(lambda _: self._refreshes.pop(key, None))

    async def _refresh(self, key: PageKey, query: str) -> None:
        # A failed refresh is not a failed request: the cached page stays until it expires, and the
        # next request after that loads it in the foreground and sees the error.
        try:
            await self.loads.do(key, lambda: self._load(key, query))
        except Exception as exc:
            if not (isinstance(exc, BulkheadFullError | UnavailableError) or postgres_is_down(exc)):
                raise
            logger.info("search page refresh skipped: %s", exc.__class__.__name__)

    async def _load(self, key: PageKey, query: str, client: str | None = None) -> bytes:
        """Fetch a page's items and cache them; `query` is any spelling of the key (all rank the same)."""
        loaded_at = self.clock()
        items = await self._fetch(query, key[1], client)
        if self.pages is not None:
            self.pages.put(key, items, loaded_at)
        return items

    async def _fetch(self, query: str, limit: int, client: str | None = None) -> bytes:
        # Postgres renders the items as JSON text; the body is assembled as bytes around it, never parsed.
        async with self.bulkhead.slot():
            metrics.RANKINGS.inc()
            items: str = await self._in_postgres(lambda conn: self._ranked(conn, query, limit), client)
        return items.encode()

    async def _in_postgres(self, run: Callable[[asyncpg.Connection], Awaitable[_T]], client: str | None) -> _T:
        """`run` on a search connection, under the statement timeout; an anonymous client's time is spent
        from the shared budget, whatever the outcome."""
        started = time.perf_counter()
        try:
            async with self.pg.acquire() as conn:
                if not self.timeout_per_transaction:
                    return await run(conn)
                async with conn.transaction(readonly=True):
                    await conn.execute(f"SET LOCAL statement_timeout = {int(self.settings.statement_timeout_ms)}")
                    return await run(conn)
        except asyncpg.QueryCanceledError:
            raise SearchTimeoutError() from None
        finally:
            if client is not None:
                self.anonymous_time.spend(time.perf_counter() - started)

    async def _ranked(self, conn: asyncpg.Connection, query: str, limit: int) -> str:
        if ONE_WORD.fullmatch(query):
            one_word: str = await conn.fetchval(RANK_ONE_WORD, query, limit)
            return one_word
        candidates = candidates_for(limit, self.settings.candidates)
        ranked_all, items = await conn.fetchrow(RANK_CANDIDATES, query, limit, candidates)
        self.full_rankings += ranked_all
        return str(items)

    async def close(self) -> None:
        tasks = list(self._refreshes.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@asynccontextmanager
async def search_lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: SearchSettings = app.state.settings.search
    pooled = app.state.settings.database.pooler == "transaction"
    server_settings = {"application_name": "tenk-search"}
    if not pooled:
        server_settings["statement_timeout"] = str(settings.statement_timeout_ms)
        # Plan the search statements once per connection. Left to choose, Postgres keeps re-planning them
        # for each query's values (their generic plan's estimated cost never wins), and planning the
        # ranking statement is a large part of its whole cost; over the query set the generic plans cost
        # less in all (3616a47's message has the figures, at 1M products). (Behind a transaction pooler
        # statements are not prepared per connection, so there is nothing to keep.)
        server_settings["plan_cache_mode"] = "force_generic_plan"
    # Its own pool, as large as the bulkhead, with a server-side statement timeout on every query; on a
    # read replica when there are any (search tolerates the replica's lag: its pages are seconds old anyway).
    replicas = app.state.settings.database.replica_urls
    tree = app.state.settings
    pool = await create_pg_pool(
        replicas[0] if replicas else tree.resolved_database_url,
        **{**pg_pool_options(tree), "max_size": settings.max_inflight},
        server_settings=server_settings,
    )
    # Pages outlive their TTL only while the catalog's listener vouches that no product changed since
    # they were read, which holds for the primary's data, not a lagging replica's.
    changes = None if replicas else app.state.catalog.changes
    service = SearchService(pool, settings, timeout_per_transaction=pooled, changes=changes)
    app.state.search = service
    try:
        yield
    finally:
        await service.close()
        await pool.close()
