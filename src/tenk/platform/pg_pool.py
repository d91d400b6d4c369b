"""The Postgres pools' hand-back: asyncpg's `Pool`, less the per-release work that does nothing for tenk.

For every query made through a pool (`pool.fetchval(...)` and the like), asyncpg 0.32 gives the
connection back through `asyncio.shield(holder.release(timeout))`: a task of its own, a timeout scope
and two awaited resets, before the holder goes back in the queue. The shield is there so that a
cancelled caller cannot leave a connection half given back.

Behind tenk's reset (`keep_session`, which does nothing), for a connection that is open, not being
cancelled, not in a transaction, and within its query limit and the pool's generation, each of those
steps is synchronous: what `Connection._reset` does then is drop the listeners. Done without an await,
nothing can cancel it halfway, so it needs no shield and no task. Any other connection, and any pool
whose reset is not `keep_session`, takes asyncpg's own path, unchanged.

The holder goes back in the queue on the loop's next turn (`call_soon`), as asyncpg's task put it back,
not within the releasing caller's turn: `asyncio.Queue` gives a non-empty queue to whoever asks, so a
caller asking in that same turn would overtake one already waiting, turn after turn: the tasks page
under 64 connections kept its median and lost its p99 (147b65c's message has the figures).
`tests/platform/test_connections.py` holds the fast path to what asyncpg's own would have done.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

# asyncpg's own default, named: a connection is closed after this many queries.
MAX_QUERIES = 50_000


async def keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset: nothing beyond what asyncpg always does on release (roll back an open
    transaction, drop listeners).

    asyncpg's default also sends `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;`
    on every release, a round trip of four statements (what it adds to a primary-key read, Postgres's CPU
    and the client's: docs/results/2026-11-29/pool-reset/).
    tenk leaves no session state on a pooled connection for it to undo: settings are `SET LOCAL`
    (search), advisory locks are transaction-scoped (partitions) or taken on a connection of their own
    (migrations), and invalidations go through Redis, not LISTEN. Cursors live only inside
    transactions, which the release rolls back if still open."""


class PromptPool(asyncpg.Pool):  # type: ignore[misc]  # asyncpg ships no types
    """An asyncpg pool that gives a clean connection back at once, without a task (see the module)."""

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:  # noqa: ASYNC109 (asyncpg's signature)
        if not self._clean(connection):
            await super().release(connection, timeout=timeout)
            return
        holder, con = connection._holder, connection._con
        con._on_release()  # warns of listeners left behind, and invalidates the proxy's references
        holder._timeout = None
        con._listeners.clear()
        con._log_listeners.clear()
        self._loop.call_soon(_requeue, holder)

    def _clean(self, connection: Any) -> bool:
        """Whether asyncpg's release would do nothing but drop listeners and requeue the holder."""
        if type(connection) is not PoolConnectionProxy or self._reset is not keep_session:
            return False
        holder, con = connection._holder, connection._con
        if holder._pool is not self or con is None or holder._in_use is None:
            return False
        if not self._initialized or self._closed:
            return False
        protocol = con._protocol
        return not (
            con.is_closed()
            or protocol.queries_count >= holder._max_queries
            or holder._generation != self._generation
            or protocol._is_cancelling()
            or protocol.is_in_transaction()
            or con._top_xact is not None
        )


def _requeue(holder: Any) -> None:
    """What asyncpg's release does last: the holder back in the queue (waking the first caller waiting),
    and the idle timer started."""
    holder._release()
    holder._setup_inactive_callback()


async def create_pool(dsn: str, *, min_size: int, max_size: int, prompt: bool = True, **kwargs: Any) -> asyncpg.Pool:
    """`asyncpg.create_pool`, making a `PromptPool` whose reset is `keep_session`; with `prompt` off, asyncpg's
    own `Pool` with that reset (the stock path, `tenk.platform.fast_paths`)."""
    if not prompt:
        return await asyncpg.create_pool(
            dsn, min_size=min_size, max_size=max_size, max_queries=MAX_QUERIES, reset=keep_session, **kwargs
        )
    pool = PromptPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        max_queries=MAX_QUERIES,
        reset=keep_session,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        **kwargs,
    )
    await pool
    return pool
