"""How many connections redis-py's asyncio client opens for many commands at once, with its default pool
and with a bounded blocking one (rule unbounded-pool).

`python -m tests.doctor.costs.redis_pool URL` prints the counts as JSON, with redis-py's version: the slow
test runs it where an older redis-py is installed; the suite calls `connections()` on the locked one.
It imports only redis-py and the standard library.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio

from tests.doctor.costs.counting import audited

COMMANDS = 150


def connects(events: list[tuple[str, tuple[Any, ...], int]], url: str) -> int:
    """Connections made to the server of a Redis `url` among audited events: to its unix socket's path
    for a `unix://` URL, else to its TCP port."""
    server = server_address(url)
    return sum(1 for event, args, _ in events if event == "socket.connect" and address_key(args[1]) == server)


def server_address(url: str) -> str | int:
    parts = urlsplit(url)
    return parts.path if parts.scheme == "unix" else parts.port or 6379


def address_key(address: object) -> str | int | None:
    if isinstance(address, bytes):
        return address.decode()
    if isinstance(address, str):
        return address
    return address[1] if isinstance(address, tuple) and len(address) >= 2 else None


async def _opened(client: redis.asyncio.Redis, url: str) -> int:
    """Connections a client opens for `COMMANDS` commands at once; each blocks on the server briefly so
    that none hands its connection back before the others ask. Past a ceiling, a command waits or fails:
    either way it opens none."""
    with audited().watching() as events:
        commands = (client.blpop(["doctor-cost-empty"], timeout=0.05) for _ in range(COMMANDS))
        await asyncio.gather(*commands, return_exceptions=True)
    await client.aclose()
    return connects(events, url)


async def connections(url: str) -> dict[str, int]:
    pattern = redis.asyncio.Redis.from_url(url)
    fix = redis.asyncio.Redis(connection_pool=redis.asyncio.BlockingConnectionPool.from_url(url, max_connections=10))
    return {
        "unbounded-pool/redis.asyncio/pattern": await _opened(pattern, url),
        "unbounded-pool/redis.asyncio/fix": await _opened(fix, url),
    }


if __name__ == "__main__":
    print(json.dumps({"redis": redis.__version__, **asyncio.run(connections(sys.argv[1]))}))
