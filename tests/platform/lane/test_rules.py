"""Each rule a route declaration must keep, broken once on a fresh app: start-up stops with one error
that names the route (method and path), what broke the rule, the rule and its fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import pytest
from fastapi import APIRouter, Body, Depends, FastAPI, Header, Path, Query, Request
from pydantic import BaseModel

from tenk.platform import (
    RULES,
    LaneDeclarationError,
    PgText,
    Reply,
    ReplyRoute,
    check_replies,
    hot,
    require_writer,
)
from tenk.platform.lane import Lane

Declare = Callable[[APIRouter], None]
Bounded = Annotated[int, Path(ge=1, le=99)]


def _returns_a_dict(router: APIRouter) -> None:
    @router.get("/things", response_model=None)
    @hot  # type: ignore[arg-type]  # what the start-up check is there to refuse
    async def things() -> dict[str, str]:
        return {}


def _on_a_plain_router(router: APIRouter) -> None:
    plain = APIRouter()

    @plain.get("/things", response_model=None)
    async def things() -> Reply:
        return Reply(200, b"[]")

    router.include_router(plain)


def _a_response_model_filter(router: APIRouter) -> None:
    @router.get("/things", response_model_exclude_none=True)
    @hot
    async def things() -> Reply:
        return Reply(200, b"[]")


def _two_methods(router: APIRouter) -> None:
    @router.api_route("/things", methods=["GET", "POST"])
    @hot
    async def things() -> Reply:
        return Reply(200, b"[]")


def _a_header(router: APIRouter) -> None:
    @router.get("/things")
    @hot
    async def things(x_thing: Annotated[str, Header()]) -> Reply:
        return Reply(200, b"[]")


def _two_path_parameters(router: APIRouter) -> None:
    @router.get("/things/{shelf}/{thing_id}")
    @hot
    async def thing(shelf: Bounded, thing_id: Bounded) -> Reply:
        return Reply(200, b"{}")


def _part_of_a_segment(router: APIRouter) -> None:
    @router.get("/things/thing-{thing_id}")
    @hot
    async def thing(thing_id: Bounded) -> Reply:
        return Reply(200, b"{}")


def _an_int_without_le(router: APIRouter) -> None:
    @router.get("/items/{item_id}")
    @hot
    async def item(item_id: Annotated[int, Path(ge=1)]) -> Reply:
        return Reply(200, b"{}")


def _a_str_with_a_validator(router: APIRouter) -> None:
    @router.get("/things")
    @hot
    async def things(q: Annotated[PgText, Query(max_length=5)]) -> Reply:
        return Reply(200, b"[]")


def _a_float(router: APIRouter) -> None:
    @router.get("/things")
    @hot
    async def things(ratio: Annotated[float, Query(ge=0, le=1)] = 0.5) -> Reply:
        return Reply(200, b"[]")


def _a_list_body(router: APIRouter) -> None:
    @router.post("/things")
    @hot
    async def things(names: list[str]) -> Reply:
        return Reply(200, b"[]")


def _a_request_parameter(router: APIRouter) -> None:
    @router.get("/things")
    @hot
    async def things(request: Request) -> Reply:
        return Reply(200, b"[]")


class Shelf(BaseModel):
    name: str


def _two_bodies(router: APIRouter) -> None:
    @router.post("/things")
    @hot
    async def things(shelf: Shelf, other: Shelf) -> Reply:
        return Reply(200, b"[]")


def _an_embedded_body(router: APIRouter) -> None:
    @router.post("/things")
    @hot
    async def things(shelf: Annotated[Shelf, Body(embed=True)]) -> Reply:
        return Reply(200, b"[]")


def thing_service(request: Request) -> object:
    return request.app.state


def _a_plain_dependency(router: APIRouter) -> None:
    @router.get("/things")
    @hot
    async def things(service: Annotated[object, Depends(thing_service)]) -> Reply:
        return Reply(200, b"[]")


def _a_route_dependency_that_checks_no_key(router: APIRouter) -> None:
    async def audited() -> None:
        return None

    @router.get("/things", dependencies=[Depends(require_writer), Depends(audited)])
    @hot
    async def things() -> Reply:
        return Reply(200, b"[]")


def _a_fixed_path_under_a_hot_template(router: APIRouter) -> None:
    @router.get("/shelves/all")
    async def all_shelves() -> Reply:
        return Reply(200, b"[]")

    @router.get("/shelves/{name}")
    @hot
    async def shelf(name: Annotated[str, Path(max_length=8)]) -> Reply:
        return Reply(200, b"{}")


def _a_template_that_takes_a_hot_path(router: APIRouter) -> None:
    @router.get("/shelves/{name}")
    @hot
    async def shelf(name: Annotated[str, Path(max_length=8)]) -> Reply:
        return Reply(200, b"{}")

    @router.get("/{kind}/{name}")
    async def anything(kind: str, name: str) -> Reply:
        return Reply(200, b"{}")


# rule -> (the declaration that breaks it, the route named, the fix's `name` and `kind`)
BROKEN: dict[str, tuple[Declare, str, str, str]] = {
    "returns-reply": (_returns_a_dict, "GET /things", "", ""),
    "reply-router": (_on_a_plain_router, "GET /things", "", ""),
    "response-model-documents": (_a_response_model_filter, "GET /things", "response_model_exclude_none", ""),
    "one-method": (_two_methods, "GET/POST /things", "", ""),
    "no-request-objects": (_a_header, "GET /things", "x_thing", ""),
    "one-path-parameter": (_two_path_parameters, "GET /things/{shelf}/{thing_id}", "thing_id", ""),
    "whole-segment": (_part_of_a_segment, "GET /things/thing-{thing_id}", "thing_id", ""),
    "bounded-int": (_an_int_without_le, "GET /items/{item_id}", "item_id", "Path"),
    "plain-str": (_a_str_with_a_validator, "GET /things", "q", "Query"),
    "int-or-str": (_a_float, "GET /things", "ratio", "Query"),
    "one-model-body": (_a_list_body, "POST /things", "names", ""),
    "app-state-services": (_a_plain_dependency, "GET /things", "service", ""),
    "key-checks-only": (_a_route_dependency_that_checks_no_key, "GET /things", "audited", ""),
    "no-fixed-path-under-a-hot-template": (_a_fixed_path_under_a_hot_template, "GET /shelves/all", "/shelves/all", ""),
    "no-shared-template": (_a_template_that_takes_a_hot_path, "GET /{kind}/{name}", "", ""),
}


# Other ways to break a rule, each refused by the same rule, naming what broke it.
ALSO_BROKEN: list[tuple[Declare, str, str, str]] = [
    (_a_request_parameter, "no-request-objects", "GET /things", "request"),
    (_two_bodies, "one-model-body", "POST /things", "shelf"),
    (_an_embedded_body, "one-model-body", "POST /things", "shelf"),
]


def _start(declare: Declare) -> None:
    """What an app's start-up does with a domain's router: the convention's check, then the lane's."""
    router = APIRouter(route_class=ReplyRoute)
    declare(router)
    app = FastAPI()
    check_replies(router.routes)
    app.include_router(router)
    Lane.derive(app.router.routes, app.state, lambda _: True)


def test_every_rule_has_a_declaration_that_breaks_it() -> None:
    assert sorted(BROKEN) == sorted(RULES)


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_a_broken_rule_stops_start_up_naming_the_route_the_rule_and_the_fix(rule: str) -> None:
    declare, route, name, kind = BROKEN[rule]
    with pytest.raises(LaneDeclarationError) as refused:
        _start(declare)
    message = str(refused.value)
    assert (refused.value.route, refused.value.rule) == (route, rule), message
    assert message.startswith(f"{route}: "), message
    assert f"Rule `{rule}`: {RULES[rule].says}." in message
    assert message.endswith(f"Fix: {RULES[rule].fix.format(name=name, kind=kind)}"), message
    if name:
        assert repr(name) in message or name in message.split(". Rule")[0], message


@pytest.mark.parametrize(("declare", "rule", "route", "name"), ALSO_BROKEN)
def test_each_other_way_to_break_a_rule_is_refused_by_that_rule(
    declare: Declare, rule: str, route: str, name: str
) -> None:
    with pytest.raises(LaneDeclarationError) as refused:
        _start(declare)
    assert (refused.value.route, refused.value.rule) == (route, rule), str(refused.value)
    assert repr(name) in str(refused.value).split(". Rule")[0], str(refused.value)


def test_an_int_without_le_is_told_the_declaration_that_bounds_it() -> None:
    with pytest.raises(LaneDeclarationError) as refused:
        _start(_an_int_without_le)
    assert str(refused.value) == (
        "GET /items/{item_id}: path parameter 'item_id': an int without le. Rule `bounded-int`: "
        f"{RULES['bounded-int'].says}. Fix: declare `item_id: Annotated[int, Path(ge=1, le=2**31-1)]`"
    )


def test_a_route_that_keeps_every_rule_starts() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/items/{item_id}", dependencies=[Depends(require_writer)])
        @hot
        async def item(item_id: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> Reply:
            return Reply(200, b"{}")

    _start(declare)
