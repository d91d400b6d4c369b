"""TENK_HOT_LANE turns the derived lane off; TENK_PRODUCT_ROUTE_DEPENDS=false swaps in the no-Depends variant."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
from fastapi.routing import iter_route_contexts

from tenk.app import create_app
from tenk.catalog.routes import get_product_without_depends
from tenk.settings import Settings
from tests.conftest import AUTH, Stack


def test_the_lane_is_on_by_default_and_off_with_the_switch_or_the_access_log(stack: Stack) -> None:
    assert "/products/{product_id}" in [route.template for route in create_app(stack.settings()).lane["GET"]]
    assert create_app(stack.settings(hot_lane=False)).lane == {}
    assert create_app(stack.settings(access_log=True)).lane == {}


async def test_the_no_depends_variant_answers_like_the_declared_route(
    stack: Stack, app_client_factory: Callable[[Settings], AsyncIterator[httpx.AsyncClient]]
) -> None:
    settings = stack.settings(hot_lane=False, product_route_depends=False, auth_reads=True)
    app = create_app(settings)
    matched = [c for c in iter_route_contexts(app.router.routes) if c.endpoint is get_product_without_depends]
    assert matched, "the variant is not mounted"
    answers = []
    for variant in (settings, settings.model_copy(update={"product_route_depends": True})):
        async for client in app_client_factory(variant):
            answers.append(
                [
                    ((r := await client.get(path, headers=headers)).status_code, r.content)
                    for path, headers in [("/products/5", AUTH), ("/products/5", {}), ("/products/999999", AUTH)]
                ]
            )
    assert answers[0] == answers[1]
    assert [status for status, _ in answers[0]] == [200, 401, 404]
