from __future__ import annotations

from typing import Annotated

import asyncpg
import orjson
from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from tenk.catalog import queries
from tenk.catalog.schemas import Product, ProductIn, ProductPage, ProductPatch
from tenk.catalog.service import MISSING, NOT_FOUND_BODY, CatalogService
from tenk.errors import ConflictError, NotFoundError
from tenk.ops.auth import require_reader, require_writer
from tenk.pagination import CursorCodec, cursor_codec, keyset_page

router = APIRouter(prefix="/products", tags=["catalog"])

ProductId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Product id.")]
_NOT_FOUND = orjson.dumps(
    {
        "error": {
            "code": "not_found",
            "message": "no such product",
            "fields": [{"field": "path.product_id", "message": "no such product"}],
        }
    }
)
_JSON = "application/json"


def _service(request: Request) -> CatalogService:
    service: CatalogService = request.app.state.catalog
    return service


def _cursors(request: Request) -> CursorCodec:
    return cursor_codec(request.app.state.settings.cursor_secret, "products")


@router.get(
    "/{product_id}",
    response_model=Product,
    responses={404: {"description": "No such product"}},
    dependencies=[Depends(require_reader)],
    summary="One product, through the process cache, Redis and Postgres",
)
async def get_product(product_id: ProductId, request: Request) -> Response:
    body = await _service(request).get_product_json(product_id)
    if body == MISSING:
        return Response(NOT_FOUND_BODY, 404, media_type=_JSON)
    return Response(body, media_type=_JSON)


@router.get("", response_model=ProductPage, dependencies=[Depends(require_reader)], summary="Products by id, keyset")
async def list_products(
    request: Request,
    after: Annotated[str | None, Query(max_length=512, description="Cursor from the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 25,
) -> Response:
    last_id = 0
    if after:
        (last_id,) = _cursors(request).decode(after, shape=(int,))
    rows = await _service(request).pg.fetch(queries.PRODUCT_PAGE, last_id, limit + 1)
    return Response(keyset_page(rows, limit, _cursors(request)), media_type=_JSON)


async def _write(request: Request, query: str, *args: object) -> Response:
    service = _service(request)
    try:
        row: str | None = await service.pg.fetchval(query, *args)
    except asyncpg.UniqueViolationError:
        raise ConflictError("a product with this sku exists", field="body.sku") from None
    if row is None:
        raise NotFoundError("no such product", field="path.product_id")
    body = row.encode()
    await service.invalidate(orjson.loads(body)["id"])
    return Response(body, 201 if query is queries.INSERT_PRODUCT else 200, media_type=_JSON)


@router.post(
    "",
    status_code=201,
    response_model=Product,
    dependencies=[Depends(require_writer)],
    summary="Create a product",
)
async def create_product(product: ProductIn, request: Request) -> Response:
    return await _write(
        request,
        queries.INSERT_PRODUCT,
        product.sku,
        product.name,
        product.description,
        product.price_cents,
        product.stock,
    )


@router.put(
    "/{product_id}",
    response_model=Product,
    dependencies=[Depends(require_writer)],
    summary="Replace a product",
)
async def replace_product(product_id: ProductId, product: ProductIn, request: Request) -> Response:
    return await _write(
        request,
        queries.REPLACE_PRODUCT,
        product_id,
        product.sku,
        product.name,
        product.description,
        product.price_cents,
        product.stock,
    )


@router.patch(
    "/{product_id}",
    response_model=Product,
    dependencies=[Depends(require_writer)],
    summary="Change some fields",
)
async def patch_product(product_id: ProductId, patch: ProductPatch, request: Request) -> Response:
    return await _write(
        request,
        queries.PATCH_PRODUCT,
        product_id,
        patch.sku,
        patch.name,
        patch.description,
        patch.price_cents,
        patch.stock,
    )
