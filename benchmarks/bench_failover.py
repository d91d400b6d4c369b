"""`make bench-failover`: how many accepted events a Redis Cluster failover loses, per durability mode.

A 202 means the shard's master has the events; its replica gets them a moment later. A failover loses
what the master had acknowledged and the replica had not yet received: the replication lag. This bench
measures that window and what it costs, on a cluster of its own (3 masters, 3 replicas, 127.0.0.1), with
one API process (CPU 0, as every bench) and no worker: events are counted in the streams, so neither a
worker nor Postgres takes part (the API's pool connects lazily to a Postgres that is not there).

Per durability mode (TENK_INGEST_DURABILITY: `everysec`, `always`, `replicated` = everysec plus
`WAIT 1` after each append) and per trial, while a few clients post batches of fresh events flat out,
every batch touching every shard:

1. lag: every ~10 ms, the replica's processed offset (its INFO `slave_repl_offset`, read first) and then
   its master's `master_repl_offset`; the difference is what a failover at that instant would lose, in
   bytes, and in events through the bytes the master's replication stream grew by per event its streams
   grew by. (The master's own view of its replica, `slaveN:...,offset=`, is refreshed by REPLCONF ACK
   once a second, so it would overstate the lag by up to a second of writes.)
2. loss: the replica of shard 0's master is stopped (SIGSTOP) and its replication link closed on the
   master (CLIENT KILL TYPE replica; --keep-link leaves it, see `_cut_replica_link`), so for --stall-ms
   the master acknowledges appends that no replica gets, as in a partition or a replica that fell
   behind. Then the master is kill -9'd, the replica continued (SIGCONT) and promoted (CLUSTER FAILOVER
   TAKEOVER), and the old master started again (it rejoins as the new master's replica: until then
   `replicated` finds no replica to WAIT for). Posting goes on until a request sent after the kill and
   after every failed answer is answered 202. Lost: event ids answered 202 that no shard stream holds
   (XRANGE on the masters). Exposed: events on the killed master's shards answered 202 between the
   stop and the kill (about what the replica lacks). Unavailable: from the first failed answer after
   the kill to the first 202 of a request sent after it; kill->202: from the kill to the first 202 of a
   request sent after it (the API's cluster client retries a command whose node died, so a failover
   can show up as slow answers and no failed ones).

Under `replicated` the loss must come out 0: the WAIT of an append the replica did not get fails, so
its request is answered 503 not_replicated, not 202. The bench counts, it does not assume.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import httpx
import redis as sync_redis

from benchmarks._common import API_CPU, bench_env, masters_by_shard, serve_pinned, sources_over_every_shard, stop
from tenk.ingest import codec, keys
from tenk.ingest.settings import Durability
from tenk.stack import free_port
from tenk.stack.redis_cluster import LocalRedisCluster, free_cluster_ports

KEY = "tk_bench_failover"
AUTH = {"Authorization": f"Bearer {KEY}"}
SHARDS = 3
MODES: tuple[Durability, ...] = ("everysec", "always", "replicated")
# Generous bounds on waits that take about a second on a quiet machine; exceeding one fails the trial.
PROMOTE_WITHIN_S = 30
RECOVER_WITHIN_S = 60
HEAL_WITHIN_S = 60
# After a failed answer a client pauses this long, so a shard that answers 503 at once is not hammered.
RETRY_PAUSE_S = 0.02


@dataclass
class Post:
    """One POST /events/batch: when it left and came back, its status (0: no answer) and error code."""

    sent: float
    answered: float
    status: int
    code: str
    ids: list[str]


class Load:
    """Closed-loop posting of fresh events from `clients` concurrent clients until `stop` is set. Each
    batch cycles over sources that hash to every shard, so every request meets every shard."""

    def __init__(self, base_url: str, run: str, batch: int, clients: int) -> None:
        self.base_url = base_url
        self.batch = batch
        self.clients = clients
        self.posts: list[Post] = []
        self.shard_of: dict[str, int] = {}
        self.stop = asyncio.Event()
        self._sources = sources_over_every_shard(run, SHARDS)

    async def run(self) -> None:
        await asyncio.gather(*(self._client() for _ in range(self.clients)))

    async def _client(self) -> None:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=30, headers=AUTH) as client:
            while not self.stop.is_set():
                post = await self._post(client)
                if post.status != 202:
                    await asyncio.sleep(RETRY_PAUSE_S)

    async def _post(self, client: httpx.AsyncClient) -> Post:
        events = []
        for n in range(self.batch):
            source, shard = self._sources[n % len(self._sources)]
            event_id = str(uuid.uuid4())
            self.shard_of[event_id] = shard
            events.append({"event_id": event_id, "source": source, "ts": "2026-01-01T00:00:00Z", "payload": {"n": n}})
        sent = time.monotonic()
        status, code = 0, "no_answer"
        try:
            response = await client.post("/events/batch", json=events)
            status = response.status_code
            code = "" if status == 202 else str(response.json().get("error", {}).get("code", status))
        except httpx.TransportError:
            pass
        post = Post(sent, time.monotonic(), status, code, [str(event["event_id"]) for event in events])
        self.posts.append(post)
        return post

    def accepted(self, since: float = 0.0, until: float = float("inf")) -> list[str]:
        return [i for p in self.posts if p.status == 202 and since <= p.answered <= until for i in p.ids]


def _client(cluster: LocalRedisCluster, port: int) -> sync_redis.Redis:
    return sync_redis.Redis(port=port, password=cluster.password, socket_timeout=5)


def _stream_lengths(cluster: LocalRedisCluster, masters: dict[int, int], on: int) -> int:
    """Entries in the streams of the shards that the master on port `on` serves."""
    with _client(cluster, on) as node:
        return sum(int(node.xlen(keys.stream_key(shard))) for shard, port in masters.items() if port == on)


def _stored_ids(cluster: LocalRedisCluster) -> set[str]:
    """Every event id in every shard stream, read from the shard's master page by page."""
    ids: set[str] = set()
    for shard, port in masters_by_shard(cluster, SHARDS).items():
        with _client(cluster, port) as node:
            after = "-"
            while True:
                page = cast(
                    list[tuple[bytes, dict[bytes, bytes]]], node.xrange(keys.stream_key(shard), after, "+", 10_000)
                )
                ids.update(codec.entry_event_id(fields[keys.FIELD]) for _, fields in page)
                if len(page) < 10_000:
                    break
                after = "(" + page[-1][0].decode()
    return ids


def _offsets(master: sync_redis.Redis, replica: sync_redis.Redis) -> tuple[int, int]:
    """(master_repl_offset, the replica's processed offset); the replica's read first, so the lag is not understated."""
    processed = int(replica.info("replication")["slave_repl_offset"])
    return int(master.info("replication")["master_repl_offset"]), processed


@dataclass
class LagSamples:
    lags: list[int] = field(default_factory=list)
    offset_growth: int = 0
    entries_growth: int = 0
    seconds: float = 0.0


def _sample_lag(
    cluster: LocalRedisCluster, master: int, replica: int, masters: dict[int, int], seconds: float, every_s: float
) -> LagSamples:
    """In a thread of its own, so that the posting clients' event loop does not delay the samples."""
    samples = LagSamples()
    with _client(cluster, master) as primary, _client(cluster, replica) as secondary:
        first_offset, _ = _offsets(primary, secondary)
        first_entries = _stream_lengths(cluster, masters, master)
        began = time.monotonic()
        while time.monotonic() - began < seconds:
            offset, processed = _offsets(primary, secondary)
            samples.lags.append(max(0, offset - processed))
            time.sleep(every_s)  # the sampling period, not a wait for anything
        last_offset, _ = _offsets(primary, secondary)
        samples.entries_growth = _stream_lengths(cluster, masters, master) - first_entries
        samples.offset_growth = last_offset - first_offset
        samples.seconds = time.monotonic() - began
    return samples


def _cut_replica_link(cluster: LocalRedisCluster, master: int) -> None:
    """Close the master's replication link: what the master appends from now on reaches no replica.

    A stopped replica alone loses nothing on loopback: the kernel buffers what the master sends (tens
    of MB on Linux), and the replica reads it all once continued, even after the master is dead. A link
    that breaks (a partition, a reset) leaves the master's appends in its backlog only."""
    with _client(cluster, master) as node:
        node.execute_command("CLIENT KILL TYPE replica")


@contextmanager
def _stopped(pid: int) -> Iterator[None]:
    """The process is stopped (SIGSTOP) inside the block and continued on the way out, however it is left."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


async def _until(check: Callable[[], bool], within: float, what: str) -> None:
    """Poll a blocking `check` (in a thread) until it holds; a deadline, not a pause, ends the wait."""
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {within}s")
        await asyncio.sleep(0.01)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _trial(cluster: LocalRedisCluster, base_url: str, args: argparse.Namespace) -> dict[str, float]:
    await asyncio.to_thread(cluster.flush)
    await asyncio.to_thread(cluster.wait_healthy, HEAL_WITHIN_S)
    masters = await asyncio.to_thread(masters_by_shard, cluster, SHARDS)
    master = masters[0]
    replica = await asyncio.to_thread(cluster.replica_of, master)
    replica_pid = cluster.member(replica).pid() if replica is not None else None
    if replica is None or replica_pid is None:
        raise RuntimeError(f"shard 0's master {master} has no running replica: {cluster.members()}")
    killed_shards = {shard for shard, port in masters.items() if port == master}

    load = Load(base_url, f"fo-{uuid.uuid4().hex[:8]}", args.batch, args.clients)
    sending = asyncio.create_task(load.run())
    try:
        await asyncio.sleep(args.warmup_s)  # the load's ramp-up is not part of the lag measured
        lag = await asyncio.to_thread(
            _sample_lag, cluster, master, replica, masters, args.lag_seconds, args.sample_ms / 1000
        )

        with _stopped(replica_pid):
            stalled_at = time.monotonic()
            # Stopped first, so that it cannot reconnect and catch up before its master dies.
            if not args.keep_link:
                await asyncio.to_thread(_cut_replica_link, cluster, master)
            await asyncio.sleep(args.stall_ms / 1000)  # the stall is the fault's length, a setting
            await asyncio.to_thread(cluster.kill, master)
            killed_at = time.monotonic()
        await asyncio.to_thread(cluster.take_over, replica)
        await _until(lambda: cluster.role(replica) == "master", PROMOTE_WITHIN_S, f"{replica} promoted")
        await asyncio.to_thread(cluster.member(master).start)

        def recovered() -> bool:
            # A 202 for a request sent after the kill and after every failed answer so far.
            failed = [p.answered for p in load.posts if p.status != 202]
            since = max([killed_at, *failed])
            return any(p.status == 202 and p.sent > since for p in load.posts)

        await _until(recovered, RECOVER_WITHIN_S, "a 202 for a request sent after the kill")
    finally:
        load.stop.set()
        await sending
    await asyncio.to_thread(cluster.wait_healthy, HEAL_WITHIN_S)

    accepted = load.accepted()
    lost = set(accepted) - await asyncio.to_thread(_stored_ids, cluster)
    exposed = [i for i in load.accepted(stalled_at, killed_at) if load.shard_of[i] in killed_shards]
    failed_after_kill = [p for p in load.posts if p.status != 202 and p.answered >= killed_at]
    first_failure = min((p.answered for p in failed_after_kill), default=killed_at)
    first_ok = min((p.answered for p in load.posts if p.status == 202 and p.sent >= first_failure), default=math.nan)
    codes = Counter(p.code for p in load.posts if p.status != 202)

    bytes_per_event = lag.offset_growth / max(1, lag.entries_growth)
    events_per_s = lag.entries_growth / max(1e-9, lag.seconds)
    lags = [float(b) for b in lag.lags]

    def events(lag_bytes: float) -> float:
        return lag_bytes / bytes_per_event if bytes_per_event else 0.0

    return {
        "accepted": len(accepted),
        "lost": len(lost),
        "exposed": len(exposed),
        "not_replicated": codes["not_replicated"] * args.batch,
        "failed_requests": sum(codes.values()),
        "unavailable_s": first_ok - first_failure if failed_after_kill else 0.0,
        "kill_to_first_ok_s": first_ok - killed_at,
        "lag_samples": len(lags),
        "lag_p50_bytes": _percentile(lags, 0.5),
        "lag_p99_bytes": _percentile(lags, 0.99),
        "lag_max_bytes": max(lags, default=0.0),
        "lag_p50_events": events(_percentile(lags, 0.5)),
        "lag_p99_events": events(_percentile(lags, 0.99)),
        "lag_max_events": events(max(lags, default=0.0)),
        "lag_p99_ms": 1000 * events(_percentile(lags, 0.99)) / max(1e-9, events_per_s),
        "bytes_per_event": bytes_per_event,
        "master_events_per_s": events_per_s,
    }


def _api_env(cluster: LocalRedisCluster, mode: Durability, workdir: Path, args: argparse.Namespace) -> dict[str, str]:
    return bench_env(
        "bench-failover",
        KEY,
        # Nothing listens there: ingest needs no Postgres, and the API's pool connects lazily.
        f"postgresql://tenk@127.0.0.1:{free_port()}/tenk",
        cluster.url,
        workdir,
        {
            "TENK_INGEST_SHARDS": str(SHARDS),
            "TENK_INGEST_DURABILITY": mode,
            "TENK_INGEST_REPLICA_WAIT_MS": str(args.replica_wait_ms),
            # No worker drains the streams: the caps must not refuse anything within a run.
            "TENK_INGEST_MAX_BACKLOG": "100000000",
            "TENK_INGEST_MAX_BACKLOG_BYTES": str(4 << 30),
        },
    )


def _mode(mode: Durability, workdir: Path, args: argparse.Namespace) -> list[dict[str, float]]:
    """A fresh cluster whose members fsync as `mode` says, one API on it, and the trials."""
    # Directly in the work dir: running as root, the members run as tenk-pg, which may enter only that far.
    cluster = LocalRedisCluster(workdir / f"cluster-{mode}", free_cluster_ports(6), masters=3, maxmemory="1gb")
    for port in cluster.ports:
        cluster.member(port).appendfsync = mode
    api: subprocess.Popen[bytes] | None = None
    try:
        cluster.start()
        api, base_url = serve_pinned(
            "tenk.app:create_app",
            _api_env(cluster, mode, workdir, args),
            workdir / f"api-{mode}.log",
            ready_path="/docs",
        )
        trials = []
        for number in range(1, args.trials + 1):
            figures = asyncio.run(_trial(cluster, base_url, args))
            trials.append(figures)
            print(f"{mode} trial {number}: {json.dumps(figures)}", file=sys.stderr, flush=True)
        return trials
    finally:
        if api is not None:
            stop(api)
        for port in cluster.ports:
            pid = cluster.member(port).pid()
            if pid is not None:
                os.kill(pid, signal.SIGCONT)  # a member left stopped would not act on SIGTERM
        cluster.stop()


def _table(results: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> str:
    lines = [
        f"### failover: Redis Cluster 3x(1+1) on 127.0.0.1, one granian API on CPU {API_CPU}, {args.clients} clients x "
        f"batches of {args.batch}, replica stopped {args.stall_ms} ms "
        f"{'(link kept)' if args.keep_link else 'and its link closed'} before kill -9 of its master; medians (max)",
        "",
        "| durability | trials | acked/trial | lost | exposed | 503 not_replicated | lag p99 events (ms) "
        "| lag max events | unavailable s | kill->202 s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, trials in results.items():

        def med(key: str, trials: list[dict[str, float]] = trials) -> float:
            return statistics.median(t[key] for t in trials)

        def top(key: str, trials: list[dict[str, float]] = trials) -> float:
            return max(t[key] for t in trials)

        lines.append(
            f"| {mode} | {len(trials)} | {med('accepted'):,.0f} | {med('lost'):,.0f} ({top('lost'):,.0f}) "
            f"| {med('exposed'):,.0f} ({top('exposed'):,.0f}) | {med('not_replicated'):,.0f} "
            f"| {med('lag_p99_events'):,.1f} ({med('lag_p99_ms'):.1f} ms) | {top('lag_max_events'):,.1f} "
            f"| {med('unavailable_s'):.2f} ({top('unavailable_s'):.2f}) "
            f"| {med('kill_to_first_ok_s'):.2f} ({top('kill_to_first_ok_s'):.2f}) |"
        )
    lines += [
        "",
        "lag: master_repl_offset minus the replica's processed offset, sampled every "
        f"{args.sample_ms} ms for {args.lag_seconds} s under the same load; events via the replication bytes per "
        "stream entry; exposed: acked on the killed master's shards between the replica's stop and the kill.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5, help="failovers per durability mode")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of " + ", ".join(MODES))
    parser.add_argument("--stall-ms", type=int, default=200, help="how long the replica is stopped before the kill")
    parser.add_argument(
        "--keep-link",
        action="store_true",
        help="only stop the replica, do not close its link (on loopback the kernel then buffers what it lacks)",
    )
    parser.add_argument("--lag-seconds", type=float, default=5.0, help="how long the lag is sampled per trial")
    parser.add_argument("--sample-ms", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=1.0, help="posting before the lag is sampled")
    parser.add_argument("--clients", type=int, default=8, help="concurrent posting clients")
    parser.add_argument("--batch", type=int, default=50, help="events per POST /events/batch")
    parser.add_argument("--replica-wait-ms", type=int, default=500, help="TENK_INGEST_REPLICA_WAIT_MS (replicated)")
    parser.add_argument("--json", type=Path, help="also write every trial's figures here")
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"--modes: unknown {sorted(unknown)}; choose from {', '.join(MODES)}")

    workdir = Path(tempfile.mkdtemp(prefix="tenk-bench-failover-", dir="/tmp"))
    results: dict[str, list[dict[str, float]]] = {}
    try:
        for mode in modes:
            results[mode] = _mode(cast(Durability, mode), workdir, args)
        print(_table(results, args))
        if args.json:
            args.json.write_text(
                json.dumps({"settings": vars(args) | {"json": str(args.json)}, "results": results}, indent=2)
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
