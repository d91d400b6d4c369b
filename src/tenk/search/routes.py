from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel
from starlette.responses import Response

from tenk.errors import InvalidInputError
from tenk.models import PgText
from tenk.ops.auth import require_reader
from tenk.search.service import SearchService

router = APIRouter(tags=["search"])

MAX_QUERY_CHARS = 200


class SearchHit(BaseModel):
    id: int
    sku: str
    name: str
    price_cents: int
    rank: float


class SearchResults(BaseModel):
    query: str
    items: list[SearchHit]


@router.get(
    "/search",
    response_model=SearchResults,
    dependencies=[Depends(require_reader)],
    summary="Ranked full-text search over products",
)
async def search(
    request: Request,
    q: Annotated[PgText, Query(min_length=1, max_length=MAX_QUERY_CHARS, description='Words, "phrases", or -not.')],
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> Response:
    query = q.strip()
    if not query:
        raise InvalidInputError("q must contain a word", field="query.q")
    service: SearchService = request.app.state.search
    return Response(await service.search(query, limit), media_type="application/json")
