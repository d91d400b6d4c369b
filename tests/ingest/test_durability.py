"""The AOF policy TENK_INGEST_DURABILITY promises is Redis's own config, checked by the API, never set by it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis

from harness.stack import Stack
from tenk.settings import Settings
from tenk.stack import EmbeddedRedis, start_on_free_port
from tests.support.waiting import eventually


async def _durability_check(client: httpx.AsyncClient) -> tuple[str, dict[str, object]]:
    ready = (await client.get("/ready")).json()
    return ready["status"], ready["checks"]["redis_durability"]


async def test_ready_is_degraded_while_redis_is_weaker_than_promised_and_the_api_never_changes_it(
    private_stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    redis = Redis.from_url(private_stack.redis.url, decode_responses=True)
    try:
        async with app_client_factory(private_stack.settings(ingest={"durability": "always"})) as client:
            status, check = await _durability_check(client)
            assert status == "degraded"
            assert check["ok"] is False
            # Why is in the log; /ready says only that the promise is down (no internals to the public port).
            assert check["error"] == "down"
            # A setting made at run time would be lost on the next restart: the API must not make one.
            assert (await redis.config_get("appendfsync"))["appendfsync"] == "everysec"

            await redis.config_set("appendfsync", "always")
            assert (await _durability_check(client))[0] == "ok"
    finally:
        await redis.aclose()


async def test_a_redis_restart_that_drops_the_policy_is_noticed_without_restarting_the_api(
    private_stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    redis = Redis.from_url(private_stack.redis.url, decode_responses=True)
    try:
        await redis.config_set("appendfsync", "always")  # set by hand, so not in the config file
        async with app_client_factory(private_stack.settings(ingest={"durability": "always"})) as client:
            assert (await _durability_check(client))[0] == "ok"
            caplog.clear()
            private_stack.redis.stop()
            private_stack.redis.start()
            await eventually(
                lambda: any("TENK_INGEST_DURABILITY=always" in record.getMessage() for record in caplog.records),
                30,
                "a log line naming TENK_INGEST_DURABILITY=always",
                every=0.05,
            )
            assert (await _durability_check(client))[0] == "degraded"
    finally:
        await redis.aclose()


def test_the_embedded_redis_keeps_the_promised_policy_across_restarts(stack_root: Path) -> None:
    server = start_on_free_port(lambda port: EmbeddedRedis(stack_root / "redis", port, appendfsync="always"))
    try:
        server.kill()
        server.start()
        with SyncRedis.from_url(server.url, decode_responses=True) as client:
            assert client.config_get("appendfsync")["appendfsync"] == "always"
    finally:
        server.stop()


async def test_a_redis_without_config_is_reported_as_unverified(
    private_stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    # What a managed Redis looks like to us: CONFIG is forbidden to the application's user.
    admin = Redis.from_url(private_stack.redis.url)
    try:
        await admin.acl_setuser(
            "app", enabled=True, passwords=["+apppw"], keys=["*"], channels=["*"], commands=["+@all", "-config"]
        )
    finally:
        await admin.aclose()
    url = f"redis://app:apppw@127.0.0.1:{private_stack.redis.port}/0"
    async with app_client_factory(private_stack.settings(redis={"url": url})) as client:
        status, check = await _durability_check(client)
        assert status == "ok"
        assert "unverified: CONFIG is unavailable" in str(check["detail"])
