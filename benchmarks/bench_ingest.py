"""`make bench-ingest`: the write-behind path against the direct-INSERT baseline, in the same run.

Everything runs on a stack of the bench's own (Postgres and Redis on free ports, AOF everysec unless
--durability always). One API process on CPU 0 (`taskset -c 0`), load on CPU 1. Per round:

1. baseline: POST /events where the handler INSERTs and commits (benchmarks.ingest_baseline), wrk;
2. tenk: POST /events (202 once Redis has the XADD), wrk, no worker running;
3. tenk: POST /events/batch of 500, wrk, no worker running;
4. one `tenk worker` drains the backlog that 2 and 3 left: rows/s into Postgres;
5. with that worker running, k6 sends events at a constant 5,000/s (in batches of 10, so that k6 keeps
   up on its one core); the lag from accept to visible in Postgres is written_at - accepted_at of those rows.

Several rounds; the table shows medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from redis import Redis

from benchmarks._common import (
    API_CPU,
    INGEST_EVENT,
    LOAD_CPU,
    SENT_AT,
    VENV_BIN,
    bench_env,
    cpu_seconds,
    drain,
    ingest_stack,
    post_lua,
    run_wrk,
    serve_pinned,
    sql,
    start_worker,
    stop,
)
from tenk.ingest import keys

KEY = "tk_bench_ingest"
LAG_EVENT = {**INGEST_EVENT, "source": "lag"}


def _wrk(url: str, lua: Path, seconds: int, connections: int) -> dict[str, float]:
    figures = run_wrk(url, lua, seconds, connections)
    figures["rps"] = figures["ok_rps"]  # accepted/s: only 202s count
    return figures


def _k6_script(base: str, rate: int, seconds: int, batch: int) -> str:
    # Events go in batches of `batch` so that k6 itself, sharing CPU 1, keeps up with the arrival rate.
    return f"""
import http from 'k6/http';
export const options = {{
  scenarios: {{ lag: {{ executor: 'constant-arrival-rate', rate: {rate // batch}, timeUnit: '1s',
                       duration: '{seconds}s', preAllocatedVUs: 200, maxVUs: 2000 }} }},
  summaryTrendStats: ['p(50)', 'p(99)'],
}};
const body = {json.dumps(json.dumps([LAG_EVENT] * batch))};
const params = {{ headers: {{ 'Content-Type': 'application/json', 'Authorization': 'Bearer {KEY}' }} }};
export default function () {{
  http.post('{base}/events/batch', body.replaceAll('{SENT_AT}', new Date().toISOString()), params);
}}
"""


def _serve(app: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    return serve_pinned(app, env, log, ready_path="/docs")


def _measured(
    process: subprocess.Popen[bytes], base: str, lua: Path, seconds: int, connections: int
) -> dict[str, float]:
    """wrk figures plus the server's CPU microseconds per accepted request."""
    before = cpu_seconds([process.pid])
    figures = _wrk(base, lua, seconds, connections)
    spent = cpu_seconds([process.pid]) - before
    figures["cpu_us_per_request"] = 1e6 * spent / max(1.0, figures["rps"] * seconds)
    return figures


def _backlog(redis: Redis) -> int:
    added, acked = redis.hmget(keys.STATS, ["added", "acked"])
    return int(added or 0) - int(acked or 0)


def _lag(base: str, redis: Redis, dsn: str, workdir: Path, rate: int, seconds: int, batch: int) -> dict[str, float]:
    script = workdir / "lag.js"
    script.write_text(_k6_script(base, rate, seconds, batch))
    summary = workdir / "lag-summary.json"
    subprocess.run(
        [
            "taskset",
            "-c",
            LOAD_CPU,
            str(VENV_BIN / "k6"),
            "run",
            "--quiet",
            "--summary-export",
            str(summary),
            str(script),
        ],
        check=True,
        capture_output=True,
    )
    deadline = time.monotonic() + 60
    while _backlog(redis) and time.monotonic() < deadline:
        time.sleep(0.1)
    (row,) = asyncio.run(
        sql(
            dsn,
            "SELECT count(*), percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP "
            "(ORDER BY extract(epoch FROM written_at - accepted_at)) FROM events WHERE source = 'lag'",
        )
    )
    k6 = json.loads(summary.read_text())["metrics"]
    duration = k6["http_req_duration"]
    failed = k6.get("http_req_failed", {}).get("value", 0.0)
    return {
        "rows": row[0],
        "lag_p50_ms": row[1][0] * 1000,
        "lag_p99_ms": row[1][1] * 1000,
        "accept_p99_ms": duration["p(99)"],
        "achieved_rps": k6["http_reqs"]["rate"] * batch,
        "error_pct": 100 * failed,
    }


def _round(
    args: argparse.Namespace, env: dict[str, str], dsn: str, pg_pid: int, redis: Redis, workdir: Path
) -> dict[str, dict[str, float]]:
    asyncio.run(sql(dsn, "TRUNCATE events, ingest_dead_letters"))
    redis.flushall()
    single = workdir / "single.lua"
    single.write_text(post_lua("/events", json.dumps(INGEST_EVENT).encode(), KEY))
    batch = workdir / "batch.lua"
    batch.write_text(post_lua("/events/batch", json.dumps([INGEST_EVENT] * 500).encode(), KEY))
    figures: dict[str, dict[str, float]] = {}

    process, base = _serve("benchmarks.ingest_baseline:create_app", env, workdir / "baseline.log")
    try:
        _wrk(base, single, 2, args.connections)
        figures["baseline"] = _measured(process, base, single, args.seconds, args.connections)
    finally:
        stop(process)

    process, base = _serve("tenk.app:create_app", env, workdir / "api.log")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        _wrk(base, single, 2, args.connections)
        figures["single"] = _measured(process, base, single, args.seconds, args.connections)
        figures["batch"] = _wrk(base, batch, args.batch_seconds, args.batch_connections)
        figures["batch"]["events_per_s"] = figures["batch"]["rps"] * 500
        workers, figures["drain"] = asyncio.run(
            drain(env["TENK_REDIS_URL"], 1, lambda: [start_worker("bench", env, workdir / "worker.log")], [pg_pid])
        )
        asyncio.run(sql(dsn, "TRUNCATE events"))
        figures["lag"] = _lag(base, redis, dsn, workdir, args.lag_rate, args.lag_seconds, args.lag_batch)
    finally:
        for worker in workers:
            stop(worker)
        stop(process)
    return figures


def _median(runs: list[dict[str, dict[str, float]]], case: str, key: str) -> float:
    return statistics.median(r[case][key] for r in runs)


def _table(runs: list[dict[str, dict[str, float]]], args: argparse.Namespace) -> str:
    def m(case: str, key: str) -> float:
        return _median(runs, case, key)

    ratio = m("single", "rps") / m("baseline", "rps")
    rows = [
        (
            "direct-INSERT baseline, POST /events",
            f"{m('baseline', 'rps'):,.0f} accepted/s ({m('baseline', 'cpu_us_per_request'):.0f} µs CPU each)",
            f"{m('baseline', 'p99_ms'):.1f}",
            "",
        ),
        (
            "tenk POST /events",
            f"{m('single', 'rps'):,.0f} accepted/s ({ratio:.1f}× baseline; "
            f"{m('single', 'cpu_us_per_request'):.0f} µs CPU each)",
            f"{m('single', 'p99_ms'):.1f}",
            "≥ 6,000/s, p99 < 30 ms, ≥ 5× baseline",
        ),
        (
            "tenk POST /events/batch of 500",
            f"{m('batch', 'events_per_s'):,.0f} events/s",
            f"{m('batch', 'p99_ms'):.1f}",
            "≥ 50,000 events/s",
        ),
        (
            "one worker into Postgres",
            f"{m('drain', 'rows_per_s'):,.0f} rows/s ({m('drain', 'cpu_us_per_row'):.1f} µs CPU/row incl. Postgres)",
            "",
            "≥ 50,000 rows/s",
        ),
        (
            f"accept → visible at {args.lag_rate:,}/s",
            f"lag p50 {m('lag', 'lag_p50_ms'):.0f} ms, p99 {m('lag', 'lag_p99_ms'):.0f} ms",
            f"{m('lag', 'accept_p99_ms'):.1f}",
            "lag p99 ≤ 1 s",
        ),
    ]
    lines = [
        f"### ingest: one granian API process on CPU {API_CPU}, load on CPU {LOAD_CPU}, Redis AOF {args.durability}, "
        f"{args.rounds} rounds (medians)",
        "",
        "| what | measured | request p99 ms | target |",
        "|---|---|---:|---|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        f"wrk: {args.connections} connections x {args.seconds}s (single), {args.batch_connections} x "
        f"{args.batch_seconds}s (batch); drained backlog {m('drain', 'backlog'):,.0f} events; k6 constant arrival "
        f"{args.lag_rate}/s (batches of {args.lag_batch})"
        f" x {args.lag_seconds}s reached {m('lag', 'achieved_rps'):,.0f}/s; errors: baseline "
        f"{m('baseline', 'error_pct'):.2f}%, single {m('single', 'error_pct'):.2f}%, "
        f"batch {m('batch', 'error_pct'):.2f}%, lag run {m('lag', 'error_pct'):.2f}%",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--batch-seconds", type=int, default=5)
    parser.add_argument("--batch-connections", type=int, default=8)
    parser.add_argument("--lag-rate", type=int, default=5000)
    parser.add_argument("--lag-seconds", type=int, default=10)
    parser.add_argument("--lag-batch", type=int, default=10, help="events per request in the lag run")
    parser.add_argument("--durability", choices=["everysec", "always"], default="everysec")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()

    with ingest_stack("tenk-bench-ingest-", args.durability) as (workdir, pg, redis_server):
        env = bench_env(
            "bench-ingest",
            KEY,
            pg.url,
            redis_server.url,
            workdir,
            {"TENK_INGEST_DURABILITY": args.durability, "TENK_INGEST_MAX_BACKLOG": "100000000"},
        )
        redis = Redis.from_url(redis_server.url)
        try:
            runs = []
            for number in range(1, args.rounds + 1):
                figures = _round(args, env, pg.url, pg.pid() or 0, redis, workdir)
                runs.append(figures)
                print(f"round {number}: {json.dumps(figures)}", file=sys.stderr, flush=True)
        finally:
            redis.close()
    print(_table(runs, args))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
