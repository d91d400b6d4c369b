from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx

from harness.clients import AUTH
from harness.stack import Stack
from tenk.settings import Settings
from tenk.stack import free_port


async def test_ready_reports_each_dependency(client: httpx.AsyncClient) -> None:
    response = await client.get("/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["postgres"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is True


async def test_postgres_down_makes_ready_503_while_health_stays_200(
    private_stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(private_stack.settings()) as client:
        assert (await client.get("/ready")).status_code == 200
        private_stack.pg.stop()
        ready = await client.get("/ready")
        assert ready.status_code == 503
        assert ready.json()["checks"]["postgres"]["ok"] is False
        assert ready.json()["status"] == "down"
        assert (await client.get("/health")).status_code == 200


async def test_redis_down_makes_ready_degraded_not_down(
    private_stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(private_stack.settings()) as client:
        private_stack.redis.stop()
        ready = await client.get("/ready")
        assert ready.status_code == 200
        assert ready.json()["status"] == "degraded"
        assert ready.json()["checks"]["redis"]["ok"] is False


async def test_postgres_down_is_503_with_retry_after_for_uncached_reads_and_writes(
    private_stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(private_stack.settings()) as client:
        assert (await client.get("/products/9")).status_code == 200
        private_stack.pg.stop()
        assert (await client.get("/products/9")).status_code == 200, "a cached product stays readable"
        for response in (
            await client.get("/products/10"),
            await client.get("/tasks"),
            await client.post("/tasks", json={"title": "x"}, headers=AUTH),
        ):
            assert response.status_code == 503, response.text
            assert int(response.headers["retry-after"]) >= 1
            assert response.json()["error"]["code"] in ("database_unavailable", "circuit_open")


async def test_ready_says_down_and_the_dependency_never_its_address(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    dead = free_port()
    settings = stack.settings(
        database={"url": f"postgresql://tenk:pw@127.0.0.1:{dead}/tenk"}, redis={"url": f"redis://127.0.0.1:{dead}/0"}
    )
    async with app_client_factory(settings) as client:
        ready = await client.get("/ready")
        assert ready.status_code == 503
        body = ready.json()
        assert body["status"] == "down"
        assert {"postgres", "redis"} <= set(body["checks"])
        assert all(check == {"ok": False, "error": "down"} for check in body["checks"].values()), body
        assert str(dead) not in ready.text
        assert "127.0.0.1" not in ready.text
