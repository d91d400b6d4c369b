"""`make bench-shards`: ingest with TENK_INGEST_SHARDS=1 against TENK_INGEST_SHARDS=3, on a Redis Cluster.

The stack is the bench's own, started once for the whole run: a Redis Cluster of 3 masters with --replicas
replicas each (`LocalRedisCluster`: AOF everysec, `noeviction`) and one embedded Postgres, migrated, all on
127.0.0.1. The three shards' streams hash to slots on three different masters (the table shows how many
masters a setting's streams are on). One measurement, for N shards and W workers, on an emptied cluster
(FLUSHALL on every master) and emptied `events` and `ingest_dead_letters` tables:

1. accept: one API process (granian, one worker, `taskset -c 0`) with TENK_INGEST_SHARDS=N and no worker
   running. wrk on CPU 1 posts the same POST /events/batch of 500 events over --connections connections for
   --seconds, after a 1 s warm-up whose events stay in the backlog. The 500 events cycle over six sources,
   two per shard of three (of the largest --shards; chosen by `keys.shard_of`, as the API shards), so that
   with 3 shards every request appends to every shard, and with 1 shard the body is the same, byte for
   byte. Figures: events/s answered 202 (2xx answers x 500) and wrk's p99 per request.
2. drain: the API is stopped and W `tenk worker` processes (not pinned) start on that backlog, all of it.
   Rows/s: `rows_written` (which the workers count as they commit) from the first written row until the
   backlog of every shard (added minus acknowledged, the counters /ingest/stats reads) is 0. CPU per row:
   user+system CPU (psutil) of the workers and of Postgres (postmaster and backends) over the same span,
   divided by the rows; the Redis members' CPU per row is shown apart. After the drain, the rows in
   `events` and the dead letters are counted, to show that each drain wrote exactly its backlog.

Each round runs every (N, W) of --shards x --workers in one order, the next round in the reverse order, so
that drift on the machine hits both settings alike. A setting's accept figures come from all its
measurements (one per W per round). The table gives medians and min–max over the rounds; --json writes
every measurement.

What this measures, and what not: on a 2-core machine every shard's master (and its replica), Postgres
and the workers share the same two cores, the very cores the API and wrk are pinned to. Three masters
get no more CPU than one. So the figure shows what sharding costs on one machine (a script call per
shard for each round of appends, a reader per shard in every worker, more servers to schedule), not how
ingest scales when each master has a machine of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks._common import (
    API_CPU,
    INGEST_EVENT,
    LOAD_CPU,
    bench_env,
    drain,
    masters_by_shard,
    post_lua,
    run_wrk,
    serve_pinned,
    sources_over_every_shard,
    sql,
    start_worker,
    stop,
)
from tenk.stack import EmbeddedPostgres, free_port
from tenk.stack.migrate import migrate
from tenk.stack.redis_cluster import LocalRedisCluster, free_cluster_ports

KEY = "tk_bench_shards"
BATCH = 500
MASTERS = 3
WARMUP_S = 1

Figures = dict[str, float]


@dataclass
class Stack:
    cluster: LocalRedisCluster
    postgres: EmbeddedPostgres
    workdir: Path

    def redis_pids(self) -> list[int]:
        return [pid for _, _, pid in self.cluster.members() if pid is not None]


def _batch_body(shards: int) -> bytes:
    """500 events whose sources cycle over every one of `shards` shards: each request appends to each shard."""
    sources = [source for source, _ in sources_over_every_shard("bench", shards)]
    return json.dumps([{**INGEST_EVENT, "source": sources[n % len(sources)]} for n in range(BATCH)]).encode()


def _env(stack: Stack, shards: int) -> dict[str, str]:
    return bench_env(
        "bench-shards",
        KEY,
        stack.postgres.url,
        stack.cluster.url,
        stack.workdir,
        {
            "TENK_INGEST_SHARDS": str(shards),
            # Nothing drains while wrk posts: the caps must not refuse anything, and (each shard holding
            # its share) must stay below one member's maxmemory when one shard takes it all.
            "TENK_INGEST_MAX_BACKLOG": "100000000",
            "TENK_INGEST_MAX_BACKLOG_BYTES": str(1 << 30),
        },
    )


def _accept(stack: Stack, env: dict[str, str], lua: Path, args: argparse.Namespace) -> Figures:
    api, base = serve_pinned("tenk.app:create_app", env, stack.workdir / "api.log", ready_path="/docs")
    try:
        run_wrk(base, lua, WARMUP_S, args.connections)
        posted = run_wrk(base, lua, args.seconds, args.connections)
    finally:
        stop(api)
    return {
        "events_per_s": posted["ok_rps"] * BATCH,
        "p99_ms": posted["p99_ms"],
        "error_pct": posted["error_pct"],
    }


def _drain(stack: Stack, env: dict[str, str], shards: int, workers: int) -> Figures:
    log = stack.workdir / "workers.log"
    started, figures = asyncio.run(
        drain(
            stack.cluster.url,
            shards,
            lambda: [start_worker(f"bench-{n}", env, log) for n in range(workers)],
            [stack.postgres.pid() or 0],
            {"redis": stack.redis_pids()},
        )
    )
    for worker in started:
        stop(worker)
    ((rows, dead),) = asyncio.run(
        sql(stack.postgres.url, "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM ingest_dead_letters)")
    )
    return {**figures, "rows_in_postgres": float(rows), "dead_letters": float(dead)}


def _measure(stack: Stack, shards: int, workers: int, lua: Path, args: argparse.Namespace) -> Figures:
    stack.cluster.flush()
    asyncio.run(sql(stack.postgres.url, "TRUNCATE events, ingest_dead_letters"))
    env = _env(stack, shards)
    accepted = _accept(stack, env, lua, args)
    drained = _drain(stack, env, shards, workers)
    masters = len(set(masters_by_shard(stack.cluster, shards).values()))
    return {
        "shards": float(shards),
        "workers": float(workers),
        "masters": float(masters),
        **accepted,
        **{f"drain_{name}": value for name, value in drained.items()},
    }


def _spread(values: list[float], fmt: str) -> str:
    """The median, with min–max when the values differ."""
    median = format(statistics.median(values), fmt)
    low, high = min(values), max(values)
    return median if low == high else f"{median} ({format(low, fmt)}–{format(high, fmt)})"


def _table(runs: list[Figures], args: argparse.Namespace) -> str:
    settings = sorted({int(run["shards"]) for run in runs})

    def values(shards: int, key: str, workers: int | None = None) -> list[float]:
        return [run[key] for run in runs if run["shards"] == shards and (workers is None or run["workers"] == workers)]

    def row(label: str, key: str, fmt: str, workers: int | None = None, compared: bool = True) -> str:
        cells = [_spread(values(shards, key, workers), fmt) for shards in settings]
        if len(settings) == 2:
            first, last = (statistics.median(values(shards, key, workers)) for shards in settings)
            cells.append(f"{last / first:.2f}×" if first and compared else "")
        return f"| {label} | " + " | ".join(cells) + " |"

    ratio = [f"{settings[1]} vs {settings[0]}"] if len(settings) == 2 else []
    lines = [
        f"### ingest by TENK_INGEST_SHARDS: Redis Cluster {MASTERS}x(1+{args.replicas}) on 127.0.0.1 (AOF everysec), "
        f"one granian API on CPU {API_CPU}, wrk on CPU {LOAD_CPU} ({args.connections} connections x {args.seconds} s); "
        f"workers, Postgres and Redis unpinned on {os.cpu_count()} cores; {args.rounds} rounds, medians (min–max)",
        "",
        "| what | "
        + " | ".join(f"{shards} shard{'s' if shards > 1 else ''}" for shards in settings)
        + "".join(f" | {r}" for r in ratio)
        + " |",
        "|---|" + "---:|" * (len(settings) + len(ratio)),
        row("masters the streams are on", "masters", ".0f", compared=False),
        row(f"POST /events/batch of {BATCH}, no worker: events/s accepted (202)", "events_per_s", ",.0f"),
        row("… request p99 ms", "p99_ms", ".1f"),
    ]
    for workers in sorted({int(run["workers"]) for run in runs}):
        named = f"{workers} worker{'s' if workers > 1 else ''}"
        lines += [
            row(f"{named} draining that backlog: rows/s into Postgres", "drain_rows_per_s", ",.0f", workers),
            row("… µs CPU per row, workers + Postgres", "drain_cpu_us_per_row", ".1f", workers),
            row("… µs CPU per row, Redis members", "drain_redis_cpu_us_per_row", ".1f", workers),
        ]
    incomplete = [run for run in runs if run["drain_left"] or run["drain_rows_in_postgres"] != run["drain_backlog"]]
    lines += [
        "",
        f"backlog drained per measurement: {_spread([run['drain_backlog'] for run in runs], ',.0f')} events; "
        f"wrk errors (non-2xx, socket): at most {max(run['error_pct'] for run in runs):.2f} %; "
        f"dead letters: {sum(run['drain_dead_letters'] for run in runs):.0f}; "
        + (
            f"{len(incomplete)} drains did not end with exactly their backlog in Postgres (see --json)"
            if incomplete
            else "every drain wrote exactly its backlog"
        ),
    ]
    return "\n".join(lines)


def _numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10, help="wrk's measured run per measurement")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections posting batches")
    parser.add_argument("--shards", type=_numbers, default=[1, 3], help="TENK_INGEST_SHARDS values")
    parser.add_argument("--workers", type=_numbers, default=[1, 2], help="`tenk worker` counts draining the backlog")
    parser.add_argument("--replicas", type=int, default=1, help="replicas per master")
    parser.add_argument("--json", type=Path, help="also write every measurement's figures here")
    args = parser.parse_args()
    if not args.shards or not args.workers or min(args.shards + args.workers) < 1:
        parser.error("--shards and --workers take positive counts, e.g. 1,3")

    workdir = Path(tempfile.mkdtemp(prefix="tenk-bench-shards-", dir="/tmp"))
    # Directly in the work dir: running as root, the servers run as tenk-pg, which may enter only that far.
    cluster = LocalRedisCluster(
        workdir / "cluster",
        free_cluster_ports(MASTERS * (1 + args.replicas)),
        masters=MASTERS,
        replicas_per_master=args.replicas,
        maxmemory="4gb",
    )
    stack = Stack(cluster, EmbeddedPostgres(workdir / "postgres", free_port()), workdir)
    lua = workdir / "batch.lua"
    # One body for every setting, spread over the shards of the largest, so that only the setting differs.
    lua.write_text(post_lua("/events/batch", _batch_body(max(args.shards)), KEY))
    try:
        stack.postgres.start()
        cluster.start()
        asyncio.run(migrate(stack.postgres.url))
        order = [(shards, workers) for shards in args.shards for workers in args.workers]
        runs: list[Figures] = []
        for number in range(1, args.rounds + 1):
            for shards, workers in order if number % 2 else reversed(order):
                figures = _measure(stack, shards, workers, lua, args)
                runs.append(figures)
                print(f"round {number}: {json.dumps(figures)}", file=sys.stderr, flush=True)
        print(_table(runs, args))
        if args.json:
            args.json.write_text(
                json.dumps({"settings": vars(args) | {"json": str(args.json)}, "runs": runs}, indent=2)
            )
    finally:
        cluster.stop()
        stack.postgres.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
