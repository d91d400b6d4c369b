from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from tenk.platform import Reply, ReplyRoute, app_state, errors_documented, hot, require_reader
from tenk.upstream.schemas import SYMBOL_PATTERN, Quote
from tenk.upstream.service import QuoteService

router = APIRouter(prefix="/quotes", tags=["quotes"], route_class=ReplyRoute)

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
QuotesDep = Annotated[QuoteService, app_state("quotes")]


@router.get(
    "/{symbol}",
    response_model=Quote,
    responses=errors_documented(
        {
            404: "The vendor has no such symbol",
            502: "The vendor failed",
            503: "Breaker open or too many calls in flight; see Retry-After",
            504: "The vendor did not answer in time",
        }
    ),
    dependencies=[Depends(require_reader)],
    operation_id="get_quote",
    summary="A quote from the (slow, fallible) vendor, cached briefly and coalesced",
)
@hot
async def get_quote(symbol: Symbol, quotes: QuotesDep) -> Reply:
    return Reply(200, await quotes.get_quote_json(symbol))
