"""`python -m benchmarks.search_hammer` (after `tenk up`): does a hammer on anonymous search move /tasks's p99?

Issue 23, item 8: with the budgets of anonymous search on (tenk.search.budget: statements per client,
and a share of Postgres time for all of them), a hammer of 16 clients must not move `GET /tasks`'s p99
by 2x or more. Each case starts one API process on CPU 0 and measures /tasks?limit=25 from one
sequential probe, first unloaded, then while 16 clients (each from its own loopback address,
127.0.0.10-25, so each has its own budget) send never-repeated searches that must be ranked in full,
as fast as they are answered. The hammer runs in its own process on CPU 1, so the probe never shares
an event loop with it. The same is measured with the shared time budget off (per-client budgets
alone) and with both off (the bulkhead alone) for comparison.

Wall-clock figures: run it on a quiet machine, never beside other work.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._common import LOAD_CPU, VENV_BIN, serve_pinned, start_process, stop
from harness.clients import SEARCH_LIMITS_OFF

CLIENTS = 16
FIRST_CLIENT_ADDRESS = 10  # 127.0.0.10 onwards: any 127/8 address is the loopback on Linux
CONNECTIONS_PER_CLIENT = 4
CASES = {
    "budgets on (default)": {},
    "per-client budget only": {"TENK_SEARCH_ANONYMOUS_DB_SHARE": "0"},
    "budgets off (bulkhead alone)": SEARCH_LIMITS_OFF,
}


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _probe(base: str, seconds: float) -> list[float]:
    """/tasks latencies, one request after another, for `seconds`."""
    samples: list[float] = []
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=base, timeout=30) as http:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            assert http.get("/tasks", params={"limit": 25}).status_code == 200
            samples.append(time.perf_counter() - started)
    return samples


async def _hammer(base: str, seconds: float) -> Counter[int]:
    """CLIENTS clients, each from its own address, each with CONNECTIONS_PER_CLIENT loops of unique searches."""
    statuses: Counter[int] = Counter()
    counter = itertools.count()
    deadline = time.monotonic() + seconds

    async def loop(http: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            # A common word less its usual companions: few matches among its candidates, so the GIN match is
            # ranked in full; the unique exclusion keeps it out of every cache.
            query = f"kettle -zq{next(counter)} -lamp -compact -rugged"
            try:
                response = await http.get("/search", params={"q": query, "limit": 50})
                statuses[response.status_code] += 1
                if response.status_code == 429:
                    # A well-behaved client waits; a hostile one would not, and costs no Postgres either way.
                    await asyncio.sleep(min(1.0, float(response.headers.get("retry-after", "1"))))
            except httpx.HTTPError:
                statuses[0] += 1

    clients = [
        httpx.AsyncClient(
            base_url=base,
            timeout=60,
            transport=httpx.AsyncHTTPTransport(local_address=f"127.0.0.{FIRST_CLIENT_ADDRESS + i}"),
        )
        for i in range(CLIENTS)
    ]
    try:
        await asyncio.gather(*(loop(http) for http in clients for _ in range(CONNECTIONS_PER_CLIENT)))
    finally:
        for http in clients:
            await http.aclose()
    return statuses


@dataclass(frozen=True)
class Figures:
    unloaded_p99_ms: float
    loaded_p99_ms: float
    hammer_statuses: dict[str, int]  # status -> answers; 0 for a transport error


def _case(name: str, env: dict[str, str], seconds: float, workdir: Path) -> Figures:
    process, base = serve_pinned("tenk.app:create_app", {**env, **CASES[name]}, workdir / "api.log", server="uvicorn")
    try:
        _probe(base, 2)  # warm the pool and the plans
        unloaded = _p99(_probe(base, seconds))
        counts = workdir / "hammer.json"
        argv = [str(VENV_BIN / "python"), "-m", "benchmarks.search_hammer", "--hammer", base, str(seconds + 4)]
        argv.append(str(counts))
        hammer = start_process(argv, env, workdir / "hammer.log", LOAD_CPU)
        try:
            time.sleep(2)  # the hammer's clients connect and fill the search slots
            loaded = _p99(_probe(base, seconds))
        finally:
            hammer.wait(seconds + 60)
        statuses = json.loads(counts.read_text()) if counts.exists() else {}
    finally:
        stop(process)
    return Figures(unloaded * 1000, loaded * 1000, statuses)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--runs", type=int, default=3, help="runs of each case; the table gives medians")
    parser.add_argument("--case", action="append", choices=list(CASES), help="only these cases (default: all)")
    parser.add_argument("--hammer", nargs=3, metavar=("URL", "SECONDS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hammer:
        statuses = asyncio.run(_hammer(args.hammer[0], float(args.hammer[1])))
        Path(args.hammer[2]).write_text(json.dumps({str(status): count for status, count in statuses.items()}))
        return
    workdir = Path(tempfile.mkdtemp(prefix="tenk-hammer-"))
    env = {k: v for k, v in os.environ.items()}
    env.setdefault("TENK_LOG_LEVEL", "WARNING")
    print(
        f"| case | /tasks p99 unloaded ms | under a {CLIENTS}-client search hammer ms | ratio "
        f"(median of {args.runs}) | ratios of the runs | hammer answers (last run) |"
    )
    print("|---|---:|---:|---:|---|---|")
    for name in args.case or CASES:
        runs = [_case(name, env, args.seconds, workdir) for _ in range(args.runs)]
        ratios = [figures.loaded_p99_ms / figures.unloaded_p99_ms for figures in runs]
        ratio = statistics.median(ratios)
        verdict = "within 2x" if ratio < 2 else "NOT within 2x"
        print(
            f"| {name} | {statistics.median(f.unloaded_p99_ms for f in runs):.1f} "
            f"| {statistics.median(f.loaded_p99_ms for f in runs):.1f} | {ratio:.2f} ({verdict}) "
            f"| {', '.join(f'{r:.2f}' for r in ratios)} | {runs[-1].hammer_statuses} |",
            flush=True,
        )
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
