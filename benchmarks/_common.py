"""What every `make bench-*` shares: the CPU split, starting a pinned server, running wrk, and what the
ingest benches share: the event they post, sources over every shard, and timing a drain into Postgres."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx
import psutil
from redis.asyncio import Redis

from tenk.ingest import keys
from tenk.ingest.settings import Durability
from tenk.ingest.stream import Backlog, read_backlogs, summed_counters
from tenk.ops.api_keys import digest
from tenk.platform.connections import connect_redis, redis_from_url
from tenk.serving import server_argv
from tenk.settings import ServerName
from tenk.stack import EmbeddedPostgres, EmbeddedRedis, free_port
from tenk.stack.migrate import migrate
from tenk.stack.redis_cluster import LocalRedisCluster

# The API gets CPU 0 alone; load generators (and helpers) run on CPU 1.
API_CPU, LOAD_CPU = "0", "1"
REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
# Stands for the `ts` of an event in a body `post_lua` sends: each request is stamped with the second it
# is sent in, as a live producer's events are. A fixed ts put every generated id (a UUIDv7 of its ts) in
# one millisecond: a batch's ids then fell at random all over the growing `events` index, a pattern no
# live producer makes, and one that cost Postgres about a third more a row (2026-11-29).
SENT_AT = "SENT_AT_NOW"
# The event the ingest benches post (a batch is this event repeated, sources aside), so their figures compare.
INGEST_EVENT = {
    "source": "bench",
    "ts": SENT_AT,
    "payload": {"user": 42, "action": "click", "path": "/p/7"},
}
# A drain that takes longer is reported with what it left, not waited for.
DRAIN_WITHIN_S = 300


def bench_env(
    name: str, api_key: str, database_url: str, redis_url: str, workdir: Path, settings: Mapping[str, str]
) -> dict[str, str]:
    """This process's environment without any TENK_ setting of the caller's shell, pointed at the bench's own stack."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENK_")}
    env.update(
        {
            "TENK_DATABASE_URL": database_url,
            "TENK_REDIS_URL": redis_url,
            "TENK_API_KEYS": digest(api_key),
            "TENK_CURSOR_SECRET": name,
            "TENK_DATA_DIR": str(workdir / "data"),
            "TENK_LOG_LEVEL": "WARNING",
            **settings,
        }
    )
    return env


@contextmanager
def ingest_stack(
    prefix: str, appendfsync: Durability = "everysec"
) -> Iterator[tuple[Path, EmbeddedPostgres, EmbeddedRedis]]:
    """A migrated Postgres and a Redis of the bench's own, in a fresh folder under /tmp that goes with them.
    Room for any backlog a bench builds (4 GB), so a drain measures the worker, not Redis' eviction."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    pg = EmbeddedPostgres(workdir / "postgres", free_port())
    redis_server = EmbeddedRedis(workdir / "redis", free_port(), appendfsync=appendfsync, maxmemory="4gb")
    pg.start()
    redis_server.start()
    try:
        asyncio.run(migrate(pg.url))
        yield workdir, pg, redis_server
    finally:
        redis_server.stop()
        pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def start_process(argv: list[str], env: dict[str, str], log: Path, cpus: str | None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            (["taskset", "-c", cpus] if cpus else []) + argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO
        )


def serve_pinned(
    app: str,
    env: dict[str, str],
    log: Path,
    *,
    factory: bool = True,
    server: ServerName = "granian",
    ready_path: str = "/health",
    timeout_s: float = 60,
) -> tuple[subprocess.Popen[bytes], str]:
    """One worker of `app` on API_CPU; returns once `ready_path` answers below 500."""
    port = free_port()
    traced = bool(env.get("TENK_OPS_OTEL_ENDPOINT"))
    argv = server_argv(app, server, host="127.0.0.1", port=port, workers=1, factory=factory, traced=traced)
    process = start_process(argv, env, log, API_CPU)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{app} exited with {process.returncode}; see {log}")
        try:
            if httpx.get(base + ready_path, timeout=0.5).status_code < 500:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{app} did not start in {timeout_s}s; see {log}")


def start_worker(name: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """One `tenk worker`, unpinned: it shares the cores with Postgres and Redis, as it would on one machine."""
    return start_process([str(VENV_BIN / "tenk"), "worker", "--name", name], env, log, None)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def run_wrk(
    url: str,
    lua: Path | None,
    seconds: int,
    connections: int,
    *,
    timeout_s: int | None = None,
    transcript: list[str] | None = None,
) -> dict[str, float]:
    """Closed-loop wrk on LOAD_CPU. `ok_rps` counts only 2xx/3xx answers; `rps` counts every answer."""
    argv = ["taskset", "-c", LOAD_CPU, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    argv += [*([f"--timeout={timeout_s}s"] if timeout_s else []), *(["-s", str(lua)] if lua else []), url]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    if transcript is not None:
        transcript.append(" ".join(argv) + "\n" + out)

    def latency_ms(label: str) -> float:
        match = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        return float(match.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[match.group(2)] if match else float("nan")

    total_match = re.search(r"(\d+) requests in", out)
    total = float(total_match.group(1)) if total_match else 0.0
    non2xx_match = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    non2xx = float(non2xx_match.group(1)) if non2xx_match else 0.0
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    socket_errors = float(sum(map(int, errors.groups()[:3]))) if errors else 0.0
    timeouts = float(errors.group(4)) if errors else 0.0
    rps_match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    rps = float(rps_match.group(1)) if rps_match else 0.0
    bad = non2xx + socket_errors + timeouts
    return {
        "rps": rps,
        "ok_rps": rps * (total - non2xx) / total if total else 0.0,
        "p50_ms": latency_ms("50%"),
        "p99_ms": latency_ms("99%"),
        "requests": total,
        "non2xx": non2xx,
        "timeouts": timeouts,
        "socket_errors": socket_errors,
        "error_pct": 100 * bad / total if total else 100.0,
    }


def post_lua(path: str, body: bytes, api_key: str) -> str:
    """A wrk script that POSTs `body` as JSON to `path` with the API key; `SENT_AT` in it becomes the time
    each request is sent (to the second, UTC)."""
    script = (
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'wrk.headers["Authorization"] = "Bearer {api_key}"\n'
        f"wrk.body = {json.dumps(body.decode())}\n"
        f'wrk.path = "{path}"\n'
    )
    if SENT_AT.encode() in body:
        script += (
            "request = function()\n"
            f'  local stamped = wrk.body:gsub("{SENT_AT}", os.date("!%Y-%m-%dT%H:%M:%SZ"))\n'
            "  return wrk.format(nil, nil, nil, stamped)\n"
            "end\n"
        )
    return script


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU of these processes and their children: what a run cost, however busy the machine."""
    total = 0.0
    for pid in pids:
        try:
            process = psutil.Process(pid)
            for each in [process, *process.children(recursive=True)]:
                times = each.cpu_times()
                total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


async def sql(dsn: str, query: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query))
    finally:
        await conn.close()


def sources_over_every_shard(run: str, shards: int) -> list[tuple[str, int]]:
    """Two sources per shard, each with the shard the API will put it in (the same `keys.shard_of`)."""
    by_shard: dict[int, list[str]] = {shard: [] for shard in range(shards)}
    n = 0
    while any(len(sources) < 2 for sources in by_shard.values()):
        source = f"{run}-{n}"
        shard = keys.shard_of(b"id\t" + source.encode() + b"\t", shards)
        if len(by_shard[shard]) < 2:
            by_shard[shard].append(source)
        n += 1
    return [(source, shard) for shard in range(shards) for source in by_shard[shard]]


def masters_by_shard(cluster: LocalRedisCluster, shards: int) -> dict[int, int]:
    """The port of the master serving each shard's keys, as the cluster says now."""
    return {shard: cluster.master_of(keys.stream_key(shard)) for shard in range(shards)}


async def drain(
    redis_url: str,
    shards: int,
    start_workers: Callable[[], list[subprocess.Popen[bytes]]],
    counted_pids: Sequence[int],
    other_pids: Mapping[str, Sequence[int]] | None = None,
) -> tuple[list[subprocess.Popen[bytes]], dict[str, float]]:
    """Start workers on a full backlog; rows/s into Postgres from their first written row until the backlog
    of every shard is empty, read from the counters the workers keep (`keys.py`), as /ingest/stats does.

    cpu_us_per_row: CPU of the workers and `counted_pids` (Postgres) over the same span, per row; and per
    name in `other_pids` (the Redis servers), `<name>_cpu_us_per_row`. `left`: what was still backlogged
    after DRAIN_WITHIN_S (0 when the drain finished). The workers keep running: the caller stops them.
    """
    redis = redis_from_url(redis_url)
    try:
        await connect_redis(redis)
        backlog, written_before = await _progress(redis, shards)
        workers = start_workers()
        try:
            figures = await _time_drain(
                redis, shards, written_before, [*(w.pid for w in workers), *counted_pids], other_pids or {}
            )
        except BaseException:
            for worker in workers:
                stop(worker)
            raise
    finally:
        await redis.aclose()
    return workers, {"backlog": float(backlog), **figures}


async def _progress(redis: Redis, shards: int) -> tuple[int, int]:
    """(events backlogged over every shard, rows written so far)."""
    backlog = Backlog.summed(await read_backlogs(redis, shards)).total
    return backlog, (await summed_counters(redis, shards, ["rows_written"]))["rows_written"]


async def _time_drain(
    redis: Redis, shards: int, written_before: int, counted: list[int], others: Mapping[str, Sequence[int]]
) -> dict[str, float]:
    first: tuple[float, int, float, dict[str, float]] | None = None
    deadline = time.monotonic() + DRAIN_WITHIN_S
    while True:
        left, written = await _progress(redis, shards)
        now = time.monotonic()
        if first is None and written > written_before:
            first = (now, written, cpu_seconds(counted), {name: cpu_seconds(pids) for name, pids in others.items()})
        if left == 0 or now > deadline:
            break
        await asyncio.sleep(0.05)  # the polling period
    if first is None:
        raise RuntimeError(f"the workers wrote nothing in {DRAIN_WITHIN_S}s")
    began, written_then, cpu_then, others_then = first
    rows = max(1, written - written_then)
    figures = {
        "left": float(left),
        "rows_per_s": (written - written_then) / max(1e-9, now - began),
        "cpu_us_per_row": 1e6 * (cpu_seconds(counted) - cpu_then) / rows,
    }
    for name, pids in others.items():
        figures[f"{name}_cpu_us_per_row"] = 1e6 * (cpu_seconds(pids) - others_then[name]) / rows
    return figures


def print_medians(first_column: str, figure: str, figures: Mapping[str, Sequence[float]], digits: int) -> None:
    """A markdown table of each case's median and every round's figure."""
    print(f"| {first_column} | {figure} (median) | rounds |")
    print("|---|---:|---|")
    for name, runs in figures.items():
        print(f"| {name} | {statistics.median(runs):.{digits}f} | {', '.join(f'{run:.{digits}f}' for run in runs)} |")
