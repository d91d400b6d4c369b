"""`python -m tests.search.flood URL CONCURRENCY COUNT_FILE`: expensive, never-repeated searches until killed.

A common word less the words it usually comes with (`kettle -lamp -compact -rugged`) leaves few matches
among its candidates, so its GIN match is ranked in full; a unique exclusion keeps every one out of the
result cache. (Exclusions alone, `-kettle`, are answered at once since search answers a query without
a positive term with no hits: tenk.search.spelling.) Runs as its own process so that the test measuring
latency beside it does not share an event loop with it.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path

import httpx


def _record(count_file: Path, answered: int) -> None:
    # A few bytes to the page cache: cheap enough not to matter beside a search.
    count_file.write_text(str(answered))


async def _flood(base_url: str, concurrency: int, count_file: Path) -> None:
    counter = itertools.count()
    answered = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:

        async def loop() -> None:
            nonlocal answered
            while True:
                try:
                    await client.get(
                        "/search", params={"q": f"kettle -zq{next(counter)} -lamp -compact -rugged", "limit": 50}
                    )
                    answered += 1
                    _record(count_file, answered)
                except httpx.HTTPError as exc:
                    print(repr(exc), file=sys.stderr, flush=True)

        await asyncio.gather(*(loop() for _ in range(concurrency)))


if __name__ == "__main__":
    asyncio.run(_flood(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))
