from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from starlette.responses import Response

from tenk.ops.auth import require_reader
from tenk.upstream.schemas import SYMBOL_PATTERN, Quote
from tenk.upstream.service import QuoteService

router = APIRouter(prefix="/quotes", tags=["quotes"])

Symbol = Annotated[
    str,
    Path(
        min_length=1,
        max_length=12,
        pattern=SYMBOL_PATTERN,
        description="Ticker: 1-12 of A-Z, 0-9 and '.', starting with a letter or digit.",
        examples=["AAPL", "BRK.B"],
    ),
]
_UNAVAILABLE = {"description": "Breaker open or too many calls in flight; see Retry-After"}


@router.get(
    "/{symbol}",
    response_model=Quote,
    responses={
        404: {"description": "The vendor has no such symbol"},
        502: {"description": "The vendor failed"},
        503: _UNAVAILABLE,
        504: {"description": "The vendor did not answer in time"},
    },
    dependencies=[Depends(require_reader)],
    summary="A quote from the (slow, fallible) vendor, cached briefly and coalesced",
)
async def get_quote(symbol: Symbol, request: Request) -> Response:
    service: QuoteService = request.app.state.quotes
    return Response(await service.get_quote_json(symbol), media_type="application/json")
