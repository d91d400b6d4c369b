"""Keep N quote requests parked on an API until SIGTERM or a time limit; print a JSON summary.

Closed loop, a fresh symbol per request so that neither the cache nor coalescing can answer it:

    python -m tests.upstream.parker http://127.0.0.1:8000 2000 60
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections import Counter

import aiohttp


async def park(base_url: str, count: int, seconds: float) -> dict[str, object]:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    statuses: Counter[int] = Counter()
    errors: Counter[str] = Counter()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=90)) as session:

        async def worker(number: int) -> None:
            sent = 0
            while not stop.is_set():
                sent += 1
                try:
                    async with session.get(f"{base_url}/quotes/P{number:04d}X{sent:06d}") as response:
                        await response.read()
                        statuses[response.status] += 1
                except (aiohttp.ClientError, TimeoutError) as exc:
                    errors[type(exc).__name__] += 1
                    await asyncio.sleep(0.1)

        workers = [asyncio.create_task(worker(n)) for n in range(count)]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return {"statuses": {str(k): v for k, v in statuses.items()}, "errors": dict(errors)}


if __name__ == "__main__":
    url, parked, limit_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    print(json.dumps(asyncio.run(park(url, parked, limit_s))), flush=True)
