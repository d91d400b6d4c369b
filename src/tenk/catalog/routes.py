from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import asyncpg
import orjson
from fastapi import APIRouter, Depends, Path, Query
from starlette.responses import Response  # a 204's documented class: no body, no media type

from tenk.catalog import queries
from tenk.catalog.schemas import Product, ProductIn, ProductPage, ProductPatch
from tenk.catalog.service import CatalogService
from tenk.platform import (
    ConflictError,
    CursorCodec,
    NotFoundError,
    Reply,
    ReplyRoute,
    app_state,
    created,
    cursors,
    errors_documented,
    hot,
    keyset_page,
    no_content,
    require_reader,
    require_writer,
)

router = APIRouter(prefix="/products", tags=["catalog"], route_class=ReplyRoute)

ProductId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Product id.")]
CatalogDep = Annotated[CatalogService, app_state("catalog")]
ProductCursors = Annotated[CursorCodec, cursors("products")]

_NO_SUCH_PRODUCT = errors_documented({404: "No such product"})
# Where a created product's id leads: schemathesis's stateful phase follows these.
_LINKS: dict[str, Any] = {
    name: {"operationId": operation, "parameters": {"product_id": "$response.body#/id"}}
    for name, operation in [
        ("GetProduct", "get_product"),
        ("ReplaceProduct", "replace_product"),
        ("PatchProduct", "patch_product"),
        ("DeleteProduct", "delete_product"),
    ]
}


@router.get(
    "/{product_id}",
    response_model=Product,
    responses=_NO_SUCH_PRODUCT,
    dependencies=[Depends(require_reader)],
    operation_id="get_product",
    summary="One product, through the process cache, Redis and Postgres",
)
@hot
def get_product(product_id: ProductId, catalog: CatalogDep) -> Reply | Awaitable[Reply]:
    # A plain `def`: a hit answers at once, a miss hands back its load to be awaited (`tenk.platform.lane.declare`).
    cached = catalog.cached_reply(product_id)
    return catalog.load_reply(product_id) if cached is None else cached


@router.get(
    "",
    response_model=ProductPage,
    dependencies=[Depends(require_reader)],
    operation_id="list_products",
    summary="Products by id, keyset",
)
async def list_products(
    catalog: CatalogDep,
    codec: ProductCursors,
    after: Annotated[str | None, Query(max_length=512, description="Cursor from the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 25,
) -> Reply:
    last_id = codec.decode(after, shape=(int,))[0] if after else 0
    rows = await catalog.read_pool().fetch(queries.PRODUCT_PAGE, last_id, limit + 1)
    return Reply(200, keyset_page(rows, limit, codec))


async def _write(catalog: CatalogService, query: str, *args: object) -> bytes:
    try:
        row: str | None = await catalog.pg.fetchval(query, *args)
    except asyncpg.UniqueViolationError:
        raise ConflictError("a product with this sku exists", field="body.sku") from None
    if row is None:
        raise NotFoundError("no such product", field="path.product_id")
    body = row.encode()
    await catalog.invalidate(orjson.loads(body)["id"])
    return body


def _columns(product: ProductIn | ProductPatch) -> tuple[object, ...]:
    """The fields in the order INSERT_PRODUCT, REPLACE_PRODUCT and PATCH_PRODUCT take them (after the id)."""
    return product.sku, product.name, product.description, product.price_cents, product.stock


_WRITE_ERRORS = errors_documented({404: "No such product", 409: "Another product has this sku"})
_Route = TypeVar("_Route", bound=Callable[..., Any])


def _product_write(
    method: Callable[..., Callable[[_Route], _Route]], operation_id: str, summary: str
) -> Callable[[_Route], _Route]:
    """PUT and PATCH of one product: the writer's key, the product back, 404 or 409."""
    return method(
        "/{product_id}",
        response_model=Product,
        responses=_WRITE_ERRORS,
        dependencies=[Depends(require_writer)],
        operation_id=operation_id,
        summary=summary,
    )


@router.post(
    "",
    status_code=201,
    response_model=Product,
    responses={
        201: {"description": "Created; `Location` names it", "links": _LINKS},
        **errors_documented({409: "Another product has this sku"}),
    },
    dependencies=[Depends(require_writer)],
    operation_id="create_product",
    summary="Create a product",
)
async def create_product(product: ProductIn, catalog: CatalogDep) -> Reply:
    body = await _write(catalog, queries.INSERT_PRODUCT, *_columns(product))
    return created(body, router.prefix)


@_product_write(router.put, "replace_product", "Replace a product")
async def replace_product(product_id: ProductId, product: ProductIn, catalog: CatalogDep) -> Reply:
    return Reply(200, await _write(catalog, queries.REPLACE_PRODUCT, product_id, *_columns(product)))


@_product_write(router.patch, "patch_product", "Change some fields")
async def patch_product(product_id: ProductId, patch: ProductPatch, catalog: CatalogDep) -> Reply:
    return Reply(200, await _write(catalog, queries.PATCH_PRODUCT, product_id, *_columns(patch)))


@router.delete(
    "/{product_id}",
    status_code=204,
    response_class=Response,
    responses=_NO_SUCH_PRODUCT,
    dependencies=[Depends(require_writer)],
    operation_id="delete_product",
    summary="Delete a product; every process stops serving it",
)
async def delete_product(product_id: ProductId, catalog: CatalogDep) -> Reply:
    deleted = await catalog.pg.fetchval(queries.DELETE_PRODUCT, product_id)
    if deleted is None:
        raise NotFoundError("no such product", field="path.product_id")
    # Like any write: the cached copies (here, in Redis, in every other process) go, so reads see the 404.
    await catalog.invalidate(product_id)
    return no_content()
