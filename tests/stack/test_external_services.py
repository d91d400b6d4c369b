"""The same app against Debian's Postgres 15 and Redis 7, when this machine runs them (CI's does).

Everything it creates is private to the test: a fresh database, and a Redis db index it flushes.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from harness.clients import AUTH, TEST_API_KEY
from tenk.app import create_app
from tenk.ops.api_keys import digest
from tenk.settings import Settings
from tenk.stack import port_is_open
from tenk.stack.migrate import migrate
from tenk.stack.seed import seed
from tests.support.inprocess import app_in_process

SYSTEM_PG = "postgresql://postgres@127.0.0.1:5432"
SYSTEM_REDIS = "redis://127.0.0.1:6379/9"

pytestmark = pytest.mark.skipif(
    not (port_is_open(5432) and port_is_open(6379)), reason="no system Postgres on 5432 and Redis on 6379"
)


@pytest.fixture
async def system_client(tmp_path: object) -> AsyncIterator[httpx.AsyncClient]:
    database = f"tenk_compat_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(f"{SYSTEM_PG}/postgres")
    await admin.execute(f'CREATE DATABASE "{database}"')
    redis = Redis.from_url(SYSTEM_REDIS)
    try:
        dsn = f"{SYSTEM_PG}/{database}"
        await migrate(dsn)
        await seed(dsn, 300, 30)
        settings = Settings(
            database={"url": dsn},
            redis={"url": SYSTEM_REDIS},
            api_keys=[digest(TEST_API_KEY)],
            cursor_secret="external",
        )
        async with app_in_process(create_app(settings)) as client:
            yield client
    finally:
        await redis.flushdb()
        await redis.aclose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()


async def test_the_service_runs_on_debian_postgres_15_and_redis_7(system_client: httpx.AsyncClient) -> None:
    ready = (await system_client.get("/ready")).json()
    assert ready["checks"]["postgres"]["ok"]
    assert ready["checks"]["redis"]["ok"]
    # Debian's Redis runs without the AOF by default: /ready says so instead of promising durability.
    durability = ready["checks"]["redis_durability"]
    assert durability["ok"] or durability["error"] == "down"
    assert ready["status"] == ("ok" if durability["ok"] else "degraded")
    assert (await system_client.get("/products/12")).status_code == 200
    patched = await system_client.patch("/products/12", json={"stock": 999}, headers=AUTH)
    assert patched.status_code == 200
    assert (await system_client.get("/products/12")).json()["stock"] == 999
    assert (await system_client.get("/tasks", params={"limit": 5})).json()["next"]
    assert (await system_client.get("/search", params={"q": "lamp"})).status_code == 200
