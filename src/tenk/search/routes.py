from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel
from starlette.datastructures import State
from starlette.types import Scope

from tenk.platform import (
    InvalidInputError,
    Reply,
    ReplyRoute,
    TenkError,
    app_state,
    check_authorization_header,
    errors_documented,
    header,
    hot,
    require_reader,
    resolved,
)
from tenk.search.budget import client_key
from tenk.search.service import SearchService

router = APIRouter(tags=["search"], route_class=ReplyRoute)

MAX_QUERY_CHARS = 200
# PgText's rule as a pattern, which the hot lane can check itself: no NUL. (Starlette and the lane decode
# query strings with errors="replace", so a lone surrogate, PgText's other refusal, cannot arrive here.)
NO_NUL = r"^[^\x00]*$"
SearchDep = Annotated[SearchService, app_state("search")]


def _anonymous_client(state: State, scope: Scope) -> str | None:
    """The budget a caller's searches are charged to (`tenk.search.budget`); None for a caller with an
    accepted API key (with TENK_AUTH_READS on, require_reader has already made sure of it)."""
    if state.settings.auth_reads:
        return None
    authorization = header(scope, b"authorization")
    if authorization:
        try:
            check_authorization_header(authorization, state.accepted_key_digests)
        except TenkError:
            pass  # a wrong key buys nothing: counted as anonymous
        else:
            return None
    client = scope.get("client")
    return client_key(client[0]) if client else ""


AnonymousClient = Annotated[str | None, resolved(_anonymous_client)]


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
    responses=errors_documented(
        {429: "A client without an API key sent more searches to the database than its budget; see Retry-After"}
    ),
    summary="Ranked full-text search over products",
)
@hot
async def search(
    service: SearchDep,
    client: AnonymousClient,
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
    return Reply(200, await service.search(query, limit, client))
