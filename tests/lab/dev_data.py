"""The dev stack's data as a value, to compare before and after a ladder: every row of every table of its
database, where its sequences stand and which relations exist, and every key of every database of its
Redis with its value (DUMP) and whether it expires."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import redis

from tenk.settings import Settings

_RELATIONS = """
SELECT c.relname, c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' ORDER BY c.relname
"""


@dataclass(frozen=True)
class DevData:
    relations: tuple[tuple[str, str], ...]
    rows: dict[str, tuple[str, ...]]
    sequences: dict[str, tuple[int, bool]]
    redis: dict[int, dict[bytes, tuple[object, object, bool]]]


async def _database(
    url: str,
) -> tuple[tuple[tuple[str, str], ...], dict[str, tuple[str, ...]], dict[str, tuple[int, bool]]]:
    conn = await asyncpg.connect(url)
    try:
        relations = tuple((r["relname"], r["relkind"]) for r in await conn.fetch(_RELATIONS))
        rows = {}
        sequences = {}
        for name, kind in relations:
            if kind == "r":  # plain tables and the leaf partitions, which hold every partitioned table's rows
                found = await conn.fetch(f'SELECT "{name}"::text FROM "{name}"')
                rows[name] = tuple(sorted(row[0] for row in found))
            elif kind == "S":
                state = await conn.fetchrow(f'SELECT last_value, is_called FROM "{name}"')
                sequences[name] = (state["last_value"], state["is_called"])
        return relations, rows, sequences
    finally:
        await conn.close()


def _databases(url: str) -> Iterator[redis.Redis]:
    """A client on each of the server's databases (a URL's `db` outranks a `db=` argument: each gets its own)."""
    with redis.Redis.from_url(url) as client:
        count = int(client.config_get("databases")["databases"])
    parts = urlsplit(url)
    for db in range(count):
        query = urlencode([*((k, v) for k, v in parse_qsl(parts.query) if k != "db"), ("db", str(db))])
        with redis.Redis.from_url(urlunsplit(parts._replace(query=query))) as client:
            yield client


def _redis(url: str) -> dict[int, dict[bytes, tuple[object, object, bool]]]:
    found: dict[int, dict[bytes, tuple[object, object, bool]]] = {}
    for db, client in enumerate(_databases(url)):
        keys: dict[bytes, tuple[object, object, bool]] = {
            key: (client.type(key), client.dump(key) or b"", client.pttl(key) > 0) for key in client.scan_iter()
        }
        if keys:
            found[db] = keys
    return found


def snapshot(settings: Settings) -> DevData:
    """The dev stack's data, as `settings` (no URLs: the embedded servers of its data dir) resolve it."""
    relations, rows, sequences = asyncio.run(_database(settings.resolved_database_url))
    return DevData(relations, rows, sequences, _redis(settings.resolved_redis_url))


def freeze_redis(settings: Settings) -> int:
    """Take the expiry off every key of the dev Redis (cached rows, "no such product" entries), so that
    nothing in it changes by itself while a test watches it; returns how many keys had one."""
    return sum(
        int(client.persist(key)) for client in _databases(settings.resolved_redis_url) for key in client.scan_iter()
    )
