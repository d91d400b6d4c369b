from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from tenk.errors import InvalidInputError
from tenk.lane import app_state, hot
from tenk.ops.auth import require_reader
from tenk.reply import Reply
from tenk.search.service import SearchService

router = APIRouter(tags=["search"])

MAX_QUERY_CHARS = 200
# PgText's rule as a pattern, which the hot lane can check itself: no NUL. (Starlette and the lane decode
# query strings with errors="replace", so a lone surrogate, PgText's other refusal, cannot arrive here.)
NO_NUL = r"^[^\x00]*$"
SearchDep = Annotated[SearchService, app_state("search")]


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
@hot
async def search(
    service: SearchDep,
    q: Annotated[
        str,
        Query(min_length=1, max_length=MAX_QUERY_CHARS, pattern=NO_NUL, description='Words, "phrases", or -not.'),
    ],
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> Reply:
    # The body is built in Postgres and assembled as bytes (service.search): nothing here parses or validates it.
    query = q.strip()
    if not query:
        raise InvalidInputError("q must contain a word", field="query.q")
    return Reply(200, await service.search(query, limit))
