"""`python -m benchmarks.drain_split [--rounds N]`: where a one-worker drain's CPU goes.

Per round, on a stack of its own: an API pinned to CPU 0 fills a backlog with POST /events/batch for
5 s (wrk on CPU 1) and stops; then one `tenk worker` drains it, and the CPU a row of the worker, of
Postgres and of Redis are reported apart (`make bench-ingest` gives the worker and Postgres together).
To compare two commits in one window, run it from a worktree of each in turn, with
`PYTHONPATH=<worktree>/src:<worktree>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from redis import Redis

from benchmarks._common import (
    INGEST_EVENT,
    bench_env,
    drain,
    ingest_stack,
    post_lua,
    serve_pinned,
    sql,
    start_worker,
    stop,
)
from benchmarks.bench_ingest import KEY, _wrk
from tenk.stack import EmbeddedPostgres, EmbeddedRedis

FILL_S = 5


def _round(env: dict[str, str], pg: EmbeddedPostgres, redis_server: EmbeddedRedis, workdir: Path) -> dict[str, float]:
    asyncio.run(sql(pg.url, "TRUNCATE events, ingest_dead_letters"))
    client = Redis.from_url(redis_server.url)
    try:
        client.flushall()
    finally:
        client.close()
    batch = workdir / "batch.lua"
    batch.write_text(post_lua("/events/batch", json.dumps([INGEST_EVENT] * 500).encode(), KEY))
    api, base = serve_pinned("tenk.app:create_app", env, workdir / "api.log", ready_path="/docs")
    try:
        _wrk(base, batch, FILL_S, 8)
    finally:
        stop(api)
    others = {"postgres": [pg.pid() or 0], "redis": [redis_server.pid() or 0]}
    workers, figures = asyncio.run(
        drain(redis_server.url, 1, lambda: [start_worker("bench", env, workdir / "worker.log")], [], others)
    )
    for worker in workers:
        stop(worker)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with ingest_stack("tenk-drain-split-") as (workdir, pg, redis_server):
        env = bench_env("drain-split", KEY, pg.url, redis_server.url, workdir, {"TENK_INGEST_MAX_BACKLOG": "100000000"})
        for number in range(1, args.rounds + 1):
            figures = _round(env, pg, redis_server, workdir)
            print(
                f"round {number}: {figures['backlog']:,.0f} events, {figures['rows_per_s']:,.0f} rows/s; "
                f"µs CPU a row: worker {figures['cpu_us_per_row']:.1f}, "
                f"Postgres {figures['postgres_cpu_us_per_row']:.1f}, Redis {figures['redis_cpu_us_per_row']:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
