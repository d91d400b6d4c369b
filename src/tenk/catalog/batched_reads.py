"""Product reads that miss the process's cache in the same event-loop turn go out together
(`tenk.turn_batch`): Postgres reads as one `WHERE id = ANY($1)`, Redis lookups as one MGET.

A read alone (one request at a time) goes out at once, as the one-product query or command it always
was: no wait, and no cost but a counter (Postgres: 386k instructions a request against 384k before, in
callgrind, one at a time; yielding on every read cost 5 %, a flush scheduled with `call_soon` into a
task of its own 13 %, and observing the batch-size histogram for a lone read 2 %, so only batches are
observed).

A cluster's lookups are never batched: one MGET must name keys of one slot, and each product's keys
share a slot of their own (`tenk.catalog.keys`).
"""

from __future__ import annotations

from typing import cast

import asyncpg
from redis.asyncio import Redis

from tenk.catalog import keys, metrics, queries
from tenk.connections import is_cluster
from tenk.turn_batch import TurnBatch

# A product's keys, in the order a lookup answers them: its cached copy, its generation, its written LSN.
Lookup = list[bytes | None]
_LOOKUP_KEYS = 3


def batched_rows(pool: asyncpg.Pool) -> TurnBatch[int, str | None]:
    """A product's JSON text by id, or None when there is no such product."""

    async def one(product_id: int) -> str | None:
        row: str | None = await pool.fetchval(queries.PRODUCT_BY_ID, product_id)
        return row

    async def many(product_ids: list[int]) -> dict[int, str | None]:
        rows = dict(await pool.fetch(queries.PRODUCTS_BY_IDS, product_ids))
        return {product_id: rows.get(product_id) for product_id in product_ids}

    return TurnBatch(one, many, metrics.DB_BATCH_SIZE.observe)


def batched_lookups(redis: Redis) -> TurnBatch[int, Lookup]:
    """A product's cached copy, generation and written LSN, as Redis holds them (the client is built
    without decode_responses, so values are bytes)."""

    async def one(product_id: int) -> Lookup:
        return cast(Lookup, await redis.mget(*_lookup_keys(product_id)))

    async def many(product_ids: list[int]) -> dict[int, Lookup]:
        named = [key for product_id in product_ids for key in _lookup_keys(product_id)]
        values = cast(Lookup, await redis.mget(*named))
        width = _LOOKUP_KEYS
        return {product_id: values[n * width : (n + 1) * width] for n, product_id in enumerate(product_ids)}

    return TurnBatch(one, None if is_cluster(redis) else many, metrics.REDIS_BATCH_SIZE.observe)


def _lookup_keys(product_id: int) -> tuple[str, str, str]:
    return keys.product_key(product_id), keys.generation_key(product_id), keys.written_lsn_key(product_id)
