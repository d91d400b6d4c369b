"""`GET /products/{product_id}` in the hot lane (see tenk.hotpath); FastAPI's route documents and validates it."""

from __future__ import annotations

from tenk.catalog.service import MISSING, NOT_FOUND_BODY
from tenk.hotpath import HotRequest, HotResult, HotRoute

_MAX_ID = 2**63 - 1


async def product_by_id(request: HotRequest) -> HotResult:
    tail = request.tail
    # Only plain ASCII digits in range; anything else goes to FastAPI for a proper 422.
    if not (tail.isascii() and tail.isdigit()) or len(tail) > 19:
        return None
    product_id = int(tail)
    if not 1 <= product_id <= _MAX_ID:
        return None
    body = await request.state.catalog.get_product_json(product_id)
    return (404, NOT_FOUND_BODY, None) if body == MISSING else (200, body, None)


ROUTE = HotRoute("GET", "/products/{product_id}", product_by_id)
