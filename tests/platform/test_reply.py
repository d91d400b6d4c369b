"""Every route handler returns a `Reply`; the app refuses at start-up a route that returns anything else."""

from __future__ import annotations

import pytest
from fastapi import APIRouter
from starlette.responses import Response

from harness.stack import Stack
from tenk.app import Domain, create_app
from tenk.platform import LaneDeclarationError, Reply, ReplyRoute, no_content
from tests.support.inprocess import app_in_process


def test_a_domain_route_that_returns_a_response_stops_start_up_naming_the_route_and_the_fix(stack: Stack) -> None:
    router = APIRouter(prefix="/gadgets", route_class=ReplyRoute)

    @router.get("/{name}")
    async def gadget(name: str) -> Response:
        return Response(b"{}", media_type="application/json")

    with pytest.raises(LaneDeclarationError) as refused:
        create_app(stack.settings(), domains=[Domain(router)])
    message = str(refused.value)
    assert message.startswith("GET /gadgets/{name}: handler 'gadget' is annotated to return `Response`")
    assert "Rule `returns-reply`" in message
    assert "annotate the handler `-> Reply`" in message


def test_a_domain_route_on_a_plain_router_stops_start_up_naming_the_route_class(stack: Stack) -> None:
    router = APIRouter(prefix="/gadgets")

    # response_model=None: else FastAPI itself refuses to make a model of `Reply`, with its own words.
    @router.delete("/{name}", status_code=204, response_model=None)
    async def forget(name: str) -> Reply:
        return no_content()

    with pytest.raises(LaneDeclarationError) as refused:
        create_app(stack.settings(), domains=[Domain(router)])
    assert str(refused.value).startswith("DELETE /gadgets/{name}: handler 'forget' on a plain APIRoute")
    assert "route_class=ReplyRoute" in str(refused.value)


async def test_a_reply_carries_its_status_media_type_and_headers_through_fastapi(stack: Stack) -> None:
    router = APIRouter(prefix="/gadgets", route_class=ReplyRoute)

    @router.get("/text")
    async def text() -> Reply:
        return Reply(200, b"42", media_type="text/plain", headers=[("X-Gadget", "yes")])

    @router.delete("/gone")
    async def gone() -> Reply:
        return no_content()

    async with app_in_process(create_app(stack.settings(), domains=[Domain(router)])) as client:
        answer = await client.get("/gadgets/text")
        assert (answer.status_code, answer.content) == (200, b"42")
        assert [(k, v) for k, v in answer.headers.multi_items() if k != "x-request-id"] == [
            ("content-type", "text/plain"),
            ("content-length", "2"),
            ("x-gadget", "yes"),
        ]
        empty = await client.delete("/gadgets/gone")
        assert (empty.status_code, empty.content) == (204, b"")
        assert "content-type" not in empty.headers
        assert "content-length" not in empty.headers


def test_a_204_reply_with_a_body_is_refused() -> None:
    with pytest.raises(ValueError, match="a 204 answer has no body"):
        Reply(204, b"{}")
