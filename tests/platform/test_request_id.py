from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import orjson
import pytest

from harness.stack import Stack
from tenk.ops.logging import JsonFormatter
from tenk.settings import Settings


@pytest.mark.parametrize("path", ["/products/3", "/tasks", "/ping", "/no-such-route"])
async def test_request_id_is_echoed_on_every_path(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path, headers={"X-Request-ID": "abc-123.trace:7"})
    assert response.headers["x-request-id"] == "abc-123.trace:7"


@pytest.mark.parametrize("path", ["/products/3", "/tasks"])
async def test_request_id_is_generated_when_absent(client: httpx.AsyncClient, path: str) -> None:
    first = (await client.get(path)).headers["x-request-id"]
    second = (await client.get(path)).headers["x-request-id"]
    assert len(first) == 32
    assert first != second


async def test_unsafe_request_id_is_replaced(client: httpx.AsyncClient) -> None:
    response = await client.get("/tasks", headers={"X-Request-ID": "evil id\twith spaces" + "x" * 200})
    assert response.headers["x-request-id"] != "evil id\twith spaces"
    assert len(response.headers["x-request-id"]) == 32


async def test_log_lines_are_json_and_carry_the_request_id(
    stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    formatter = JsonFormatter()
    async with app_client_factory(stack.settings(access_log=True, log_level="INFO")) as client:
        with caplog.at_level(logging.INFO, logger="tenk.access"):
            await client.get("/products/4", headers={"X-Request-ID": "req-log-1"})
    lines = [orjson.loads(formatter.format(r)) for r in caplog.records if r.name == "tenk.access"]
    assert lines, "the access log wrote nothing"
    assert lines[-1]["request_id"] == "req-log-1"
    assert lines[-1]["path"] == "/products/4"
    assert lines[-1]["status"] == 200


def test_log_lines_outside_a_request_have_no_request_id() -> None:
    record = logging.getLogRecordFactory()("tenk.test", logging.INFO, __file__, 1, "hello", (), None)
    line = orjson.loads(JsonFormatter().format(record))
    assert line["msg"] == "hello"
    assert "request_id" not in line
