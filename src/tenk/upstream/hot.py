"""`GET /quotes/{symbol}` on the hot path (see tenk.hotpath); FastAPI's route documents and validates it.

Parked quote requests are the cheap part; the work is in each one's arrival and answer, so it pays to
skip FastAPI's per-request machinery here too.
"""

from __future__ import annotations

import re

from tenk.hotpath import HotRequest, HotResult, HotRoute
from tenk.upstream.schemas import SYMBOL_PATTERN

_SYMBOL = re.compile(SYMBOL_PATTERN)


async def quote_by_symbol(request: HotRequest) -> HotResult:
    # Anything but a well-formed symbol goes to FastAPI for a proper 422.
    if _SYMBOL.fullmatch(request.tail) is None:
        return None
    return 200, await request.state.quotes.get_quote_json(request.tail), None


ROUTE = HotRoute("GET", "/quotes/{symbol}", quote_by_symbol)
