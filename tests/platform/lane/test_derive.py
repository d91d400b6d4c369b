"""The lane is derived from the declaration, and refuses at start-up what it cannot mirror exactly."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Depends, FastAPI, Path, Query

from tenk.platform.auth import require_writer
from tenk.platform.lane import Lane, LaneDeclarationError, RawBody, app_state, hot
from tenk.platform.lane.derive import UNRECOGNISED
from tenk.platform.reply import Reply


def _lane_for(declare: Callable[[APIRouter], None]) -> Lane:
    router = APIRouter()
    declare(router)
    app = FastAPI()
    app.include_router(router)
    return Lane.derive(app.router.routes, app.state, lambda policy: policy.name == "writer")


def test_the_lane_reads_bounds_patterns_defaults_auth_and_body_from_the_declaration() -> None:
    def declare(router: APIRouter) -> None:
        @router.post("/shelves/{shelf}/items", dependencies=[Depends(require_writer)])
        @hot
        async def put_item(
            shelf: Annotated[str, Path(pattern=r"^[a-z]{1,8}$")],
            body: RawBody,
            service: Annotated[Any, app_state("shelves")],
            count: Annotated[int, Query(ge=2, le=40)] = 3,
        ) -> Reply:
            return Reply(200, b"{}")

    (route,) = _lane_for(declare).routes["POST"]
    assert route.body is not None
    assert (route.template, route.body[0], route.body[1](b"as sent"), route.arity) == (
        "/shelves/{shelf}/items",
        1,
        b"as sent",
        4,
    )
    assert ([policy.name for policy in route.auth], route.key_required) == (["writer"], True)
    assert route.tail("/shelves/abc/items") == "abc"
    assert route.tail("/shelves/a/b/items") is None
    assert route.path is not None
    parse = route.path[1]
    assert parse("abc") == "abc"
    (count,) = route.query
    assert (count.key, count.default, count.required) == ("count", 3, False)
    parsed = [count.parse(text) for text in ("1", "2", "40", "41", "02", "9" * 5000, "", "-2")]
    assert [value for value in parsed if isinstance(value, int)] == [2, 40]


def test_an_int_path_parameter_is_matched_only_in_its_canonical_digits() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/things/{thing_id}/parts")
        @hot
        async def thing(thing_id: Annotated[int, Path(ge=1, le=5000)]) -> Reply:
            return Reply(200, b"{}")

        @router.get("/widgets/{widget_id}")
        @hot
        async def widget(widget_id: Annotated[int, Path(ge=0, le=9)]) -> Reply:
            return Reply(200, b"{}")

    thing, widget = _lane_for(declare).routes["GET"]
    assert thing.path is not None
    tails = {text: thing.tail(f"/things/{text}/parts") for text in ("1", "5000", "0", "9999", "01", "+1", "١", "12345")}
    assert tails == {
        "1": "1",
        "5000": "5000",
        "0": "0",
        "9999": "9999",
        "01": None,
        "+1": None,
        "١": None,
        "12345": None,
    }
    # The shape has checked the digits; the parser holds the bounds.
    assert [thing.path[1](text) for text in ("1", "5000")] == [1, 5000]
    assert [thing.path[1](text) for text in ("0", "9999")] == [UNRECOGNISED, UNRECOGNISED]
    assert [widget.tail(f"/widgets/{text}") for text in ("0", "9", "10", "00")] == ["0", "9", None, None]


@pytest.mark.parametrize("hot_first", [True, False])
def test_a_template_that_may_take_a_hot_templates_path_fails_at_start_up(hot_first: bool) -> None:
    # The hot shape takes only digits, routing any segment: `/things/abc` would be the other route's in the
    # lane, and routing's first-declared in FastAPI.
    def declare(router: APIRouter) -> None:
        def hot_route() -> None:
            @router.get("/things/{thing_id}")
            @hot
            async def thing(thing_id: Annotated[int, Path(ge=1, le=5000)]) -> Reply:
                return Reply(200, b"{}")

        def other_route() -> None:
            @router.get("/{kind}/{name}")
            async def anything(kind: str, name: str) -> dict[str, str]:
                return {}

        for add in (hot_route, other_route) if hot_first else (other_route, hot_route):
            add()

    with pytest.raises(LaneDeclarationError, match="may take the same path"):
        _lane_for(declare)


def test_a_template_declared_before_a_hot_fixed_path_that_it_may_take_fails_at_start_up() -> None:
    # Routing would give `/shelves/all` to the template; the lane looks its fixed paths up first.
    def declare(router: APIRouter) -> None:
        @router.get("/shelves/{name}")
        async def shelf(name: str) -> dict[str, str]:
            return {}

        @router.get("/shelves/all")
        @hot
        async def all_shelves() -> Reply:
            return Reply(200, b"[]")

    with pytest.raises(LaneDeclarationError, match=re.escape("/shelves/{name} and the hot route /shelves/all")):
        _lane_for(declare)


def test_each_path_goes_to_the_route_whose_shape_takes_it() -> None:
    def declare(router: APIRouter) -> None:
        for template in ("/a/{item}", "/b/{item}/c", "/b/{item}/d"):

            @router.get(template, name=template)
            @hot
            async def endpoint(item: Annotated[int, Path(ge=0, le=99)]) -> Reply:
                return Reply(200, b"{}")

        @router.get("/e")
        @hot
        async def fixed() -> Reply:
            return Reply(200, b"{}")

    lane = _lane_for(declare)
    scope = {"type": "http", "method": "GET", "query_string": b"", "headers": []}
    taken = {}
    for path in ("/a/7", "/b/8/c", "/b/9/d", "/e", "/b/9", "/a/007", "/f"):
        hot_call = lane.match({**scope, "path": path})
        taken[path] = None if hot_call is None else (hot_call[0].template, hot_call[1])
    assert taken == {
        "/a/7": ("/a/{item}", [7]),
        "/b/8/c": ("/b/{item}/c", [8]),
        "/b/9/d": ("/b/{item}/d", [9]),
        "/e": ("/e", []),
        "/b/9": None,
        "/a/007": None,
        "/f": None,
    }


def test_a_hot_path_declared_twice_is_the_first_declarations_as_in_routing() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/twice", name="first")
        @hot
        async def first() -> Reply:
            return Reply(200, b"first")

        @router.get("/twice", name="second")
        @hot
        async def second() -> Reply:
            return Reply(200, b"second")

    hot_call = _lane_for(declare).match({"type": "http", "method": "GET", "path": "/twice", "query_string": b""})
    assert hot_call is not None
    assert hot_call[0].route.name == "first"  # type: ignore[attr-defined]


def test_templates_that_cannot_take_one_path_may_stand_beside_a_hot_one() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/things/{thing_id}")
        @hot
        async def thing(thing_id: Annotated[int, Path(ge=1, le=5000)]) -> Reply:
            return Reply(200, b"{}")

        @router.get("/things/{thing_id}/parts")
        @hot
        async def parts(thing_id: Annotated[int, Path(ge=1, le=5000)]) -> Reply:
            return Reply(200, b"{}")

        @router.delete("/things/{name}")
        async def forget(name: str) -> dict[str, str]:
            return {}

    assert [route.template for route in _lane_for(declare).routes["GET"]] == [
        "/things/{thing_id}",
        "/things/{thing_id}/parts",
    ]


def test_a_fixed_path_the_lane_would_also_take_fails_at_start_up() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/shelves/all")
        async def all_shelves() -> dict[str, str]:
            return {}

        @router.get("/shelves/{name}")
        @hot
        async def shelf(name: Annotated[str, Path(max_length=8)]) -> Reply:
            return Reply(200, b"{}")

    with pytest.raises(LaneDeclarationError, match="/shelves/all"):
        _lane_for(declare)


def test_a_hot_fixed_path_that_a_hot_template_also_takes_fails_at_start_up() -> None:
    # The lane looks fixed paths up first; Starlette would give `/shelves/all` to the template declared first.
    def declare(router: APIRouter) -> None:
        @router.get("/shelves/{name}")
        @hot
        async def shelf(name: Annotated[str, Path(max_length=8)]) -> Reply:
            return Reply(200, b"{}")

        @router.get("/shelves/all")
        @hot
        async def all_shelves() -> Reply:
            return Reply(200, b"[]")

    refused = re.escape("/shelves/{name} and the hot route /shelves/all may take the same path")
    with pytest.raises(LaneDeclarationError, match=refused):
        _lane_for(declare)


def test_no_lane_regex_takes_a_path_or_a_query_before_a_trailing_newline() -> None:
    # A regex's `$` also matches before a trailing newline (Starlette's route regexes end in one). The lane's
    # shapes and the patterns it reads from declarations match whole strings, so neither a path nor a query
    # value with a newline after an accepted one is the lane's: FastAPI judges it, and the edge refuses a
    # path with a control character before either lane sees it.
    def declare(router: APIRouter) -> None:
        @router.get("/things/{thing_id}")
        @hot
        async def thing(thing_id: Annotated[int, Path(ge=0, le=99)]) -> Reply:
            return Reply(200, b"{}")

        @router.get("/shelves/{shelf}")
        @hot
        async def shelf(shelf: Annotated[str, Path(pattern=r"^[a-z]+$")]) -> Reply:
            return Reply(200, b"{}")

        @router.get("/fixed")
        @hot
        async def fixed(q: Annotated[str, Query(pattern=r"^[a-z]+$")]) -> Reply:
            return Reply(200, b"{}")

    lane = _lane_for(declare)
    scope = {"type": "http", "method": "GET", "headers": []}
    for path, query in (("/things/7", b""), ("/shelves/abc", b""), ("/fixed", b"q=abc")):
        assert lane.match({**scope, "path": path, "query_string": query}) is not None, path
        for newline in ("\n", "\r\n"):
            assert lane.match({**scope, "path": path + newline, "query_string": query}) is None, path
    assert lane.match({**scope, "path": "/fixed", "query_string": b"q=abc%0A"}) is None
