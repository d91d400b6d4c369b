"""`GET /quotes/{symbol}` on the hot path (see tenk.hotpath); FastAPI's route documents and validates it.

Parked quote requests are the cheap part; the work is in each one's arrival and answer, so it pays to
skip FastAPI's per-request machinery here too.
"""

from __future__ import annotations

import re

from starlette.datastructures import State

from tenk.hotpath import HotResult, HotRoute
from tenk.upstream.schemas import SYMBOL_PATTERN

_SYMBOL = re.compile(SYMBOL_PATTERN)


async def quote_by_symbol(state: State, tail: str) -> HotResult:
    # Anything but a well-formed symbol goes to FastAPI for a proper 422.
    if _SYMBOL.fullmatch(tail) is None:
        return None
    return 200, await state.quotes.get_quote_json(tail)


ROUTE = HotRoute("/quotes/", "/quotes/{symbol}", quote_by_symbol)
