"""Reads that miss the process's cache in the same event-loop turn go out together (`tenk.platform.turn_batch`):
Postgres reads as one call of the cache's `load_many`, Redis lookups as one MGET.

A read alone (one request at a time) goes out at once, as the one-item query or command it always
was: no wait, and no cost but a counter; only batches are observed, since observing the batch-size
histogram for a lone read would cost it (docs/results/2026-11-29/redis-batch/ has what batching
saves).

A cluster's lookups are never batched: one MGET must name keys of one slot, and each item's keys share
a slot of their own (`_keys.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import cast

import asyncpg
from redis.asyncio import Redis

from tenk.platform.connections import is_cluster
from tenk.platform.readthrough._keys import KeySpace
from tenk.platform.turn_batch import TurnBatch

# What a loader answers for one id: the item's JSON (bytes, or text as Postgres renders it), or None
# when there is no such item.
Row = bytes | str | None
LoadOne = Callable[[asyncpg.Pool, int], Awaitable[Row]]
# For several ids at once: the rows found, by id (an id left out is no such item).
LoadMany = Callable[[asyncpg.Pool, list[int]], Awaitable[Mapping[int, Row]]]


def load_by_id(sql: str) -> LoadOne:
    """`load_one` from a query that takes the id as $1 and answers the item's JSON in one column (no row:
    no such item)."""

    def load(pool: asyncpg.Pool, item_id: int) -> Awaitable[Row]:
        return cast(Awaitable[Row], pool.fetchval(sql, item_id))

    return load


def load_by_ids(sql: str) -> LoadMany:
    """`load_many` from a query that takes the ids as $1 (`= ANY($1::bigint[])`) and answers rows of
    (id, the item's JSON)."""

    async def load(pool: asyncpg.Pool, item_ids: list[int]) -> Mapping[int, Row]:
        return dict(await pool.fetch(sql, item_ids))

    return load


# An item's keys, in the order a lookup answers them: its cached copy, its generation, its written LSN.
Lookup = list[bytes | None]
_LOOKUP_KEYS = 3


def batched_rows(
    pool: asyncpg.Pool, load_one: LoadOne, load_many: LoadMany | None, observe_size: Callable[[int], object]
) -> TurnBatch[int, Row]:
    """An item's row by id, from `pool`; without `load_many`, never batched."""
    # The loader's own awaitable, with no coroutine of ours around it: a lone read costs what it did
    # when the query was written here.
    one = functools.partial(load_one, pool)
    if load_many is None:
        return TurnBatch(one, None, observe_size)
    load = load_many

    async def many(item_ids: list[int]) -> dict[int, Row]:
        rows = await load(pool, item_ids)
        return {item_id: rows.get(item_id) for item_id in item_ids}

    return TurnBatch(one, many, observe_size)


def batched_lookups(redis: Redis, keys: KeySpace, observe_size: Callable[[int], object]) -> TurnBatch[int, Lookup]:
    """An item's cached copy, generation and written LSN, as Redis holds them (the client is built
    without decode_responses, so values are bytes)."""

    async def one(item_id: int) -> Lookup:
        return cast(Lookup, await redis.mget(*keys.lookup_keys(item_id)))

    async def many(item_ids: list[int]) -> dict[int, Lookup]:
        named = [key for item_id in item_ids for key in keys.lookup_keys(item_id)]
        values = cast(Lookup, await redis.mget(*named))
        width = _LOOKUP_KEYS
        return {item_id: values[n * width : (n + 1) * width] for n, item_id in enumerate(item_ids)}

    return TurnBatch(one, None if is_cluster(redis) else many, observe_size)
