"""tenk with `GET /products/{id}` served by FastAPI without `Depends()`: only the `depends-cost` preset's.

The same app as `tenk.app:create_app`, the hot lane off, and one route put before the declared one:
it reads the catalog and the reader-key setting off the app instead of through dependencies, so a
ladder can measure what FastAPI's dependency solving costs on tenk's cheapest request. It was a
production switch (TENK_PRODUCT_ROUTE_DEPENDS); it is a baseline so that production has one route.
Serve it as a plain app: `uvicorn tenk.lab.targets.baselines.product_without_depends:app`.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.responses import Response

from tenk.app import create_app
from tenk.catalog.routes import ProductId
from tenk.platform import TenkAPI, check_authorization_header, header
from tenk.platform.reply import as_response
from tenk.settings import Settings


async def get_product_without_depends(product_id: ProductId, request: Request) -> Response:
    state = request.app.state
    if state.settings.auth_reads:
        check_authorization_header(header(request.scope, b"authorization"), state.accepted_key_digests)
    return as_response(await state.catalog.product_reply(product_id))


def without_depends(settings: Settings | None = None) -> TenkAPI:
    settings = (settings or Settings()).model_copy(update={"hot_lane": False})
    app = create_app(settings)
    # First, so that FastAPI's router matches it before the declared route.
    app.router.routes.insert(
        0, APIRoute("/products/{product_id}", get_product_without_depends, methods=["GET"], include_in_schema=False)
    )
    return app


app = without_depends()
