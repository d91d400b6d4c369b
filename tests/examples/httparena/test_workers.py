"""tenk's entry in several workers, as its image runs on HttpArena's machine: with the REDIS_URL HttpArena
gives the crud profile, a write is seen by every worker before it is answered, so no read after a PUT is
answered from another worker's copy."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from harness.stack import Stack
from tests.examples.httparena.entries import start_tenk_entry

pytestmark = pytest.mark.timeout(120)
# Connections opened at once, so that the kernel spreads them over both workers' accepts; each then keeps
# its worker, and the reads through all of them fall within the copies' 200 ms.
CONNECTIONS = 8


async def test_no_worker_answers_a_read_after_a_put_from_its_old_copy(
    stack: Stack, arena_database: str, tmp_path: Path
) -> None:
    server, base_url = start_tenk_entry(arena_database, tmp_path, workers=2, REDIS_URL=stack.redis.url)
    clients = [httpx.AsyncClient(base_url=base_url, timeout=10) for _ in range(CONNECTIONS)]
    path = "/crud/items/777"

    async def names() -> set[str]:
        answers = await asyncio.gather(*(client.get(path) for client in clients))
        return {answer.json()["name"] for answer in answers}

    try:
        # Every worker holds item 777, then one of them takes the PUT.
        assert len(await names()) == 1
        update = {"name": "renamed in one worker", "price": 1, "quantity": 1}
        assert (await clients[0].put(path, json=update)).status_code == 200
        assert await names() == {"renamed in one worker"}
    finally:
        for client in clients:
            await client.aclose()
        server.stop()
