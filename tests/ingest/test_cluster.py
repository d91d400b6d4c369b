"""Ingest on a Redis Cluster: three shards, real workers, replicated durability."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

import httpx
import orjson
import psutil
import pytest
import redis

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.ingest import keys
from tenk.ingest.codec import parse_one
from tenk.ingest.producer import StreamProducer
from tenk.platform.connections import connect_redis, redis_from_url
from tenk.platform.outages import REDIS_DOWN
from tenk.settings import Settings
from tenk.stack.redis_cluster import LocalRedisCluster
from tests.ingest.streams import CLUSTER_SHARDS, count_rows
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker

pytestmark = pytest.mark.cluster

SHARDS = CLUSTER_SHARDS
SOURCES = 12
PER_SOURCE = 20
# A killed worker's entries are claimed after a second, not the default minute.
FAST_CLAIM = {"TENK_INGEST_CLAIM_IDLE_MS": "1000", "TENK_INGEST_CLAIM_EVERY_MS": "200"}


def _on_cluster(stack: Stack, redis_cluster: LocalRedisCluster, **ingest: object) -> Settings:
    """The in-process API's settings for the same cluster and shards as `cluster_env`."""
    return stack.settings(redis={"url": redis_cluster.url}, ingest={"shards": SHARDS, "flush_ms": 20, **ingest})


def _batch(run: str, seq: int) -> list[dict[str, object]]:
    """The seq-th event of every source, in one batch."""
    return [{"source": f"{run}-{n}", "ts": "2026-01-02T03:04:05Z", "payload": {"seq": seq}} for n in range(SOURCES)]


async def _post_all(client: httpx.AsyncClient, run: str) -> None:
    for seq in range(PER_SOURCE):
        answer = await client.post("/events/batch", json=_batch(run, seq), headers=AUTH)
        assert answer.status_code == 202, answer.text


def _stats_say(client: httpx.AsyncClient, check: Callable[[dict[str, Any]], bool]) -> Callable[[], Awaitable[bool]]:
    async def poll() -> bool:
        return check((await client.get("/ingest/stats", headers=AUTH)).json())

    return poll


async def _rows_of(stack: Stack, run: str) -> int:
    return await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source LIKE $1", f"{run}-%")


async def _distinct_seqs_of(stack: Stack, run: str) -> int:
    return await count_rows(
        stack.pg.url,
        "SELECT count(DISTINCT (source, payload->>'seq')) FROM events WHERE source LIKE $1",
        f"{run}-%",
    )


async def _stream_contents(url: str) -> dict[int, list[tuple[str, int]]]:
    """(source, seq) of every entry, per shard, in stream order."""
    redis = redis_from_url(url)
    try:
        contents: dict[int, list[tuple[str, int]]] = {}
        for shard in range(SHARDS):
            entries: Any = await redis.xrange(keys.stream_key(shard))
            rows = []
            for _, fields in entries:
                _, source, _, _, payload = fields[keys.FIELD].split(b"\t", 4)
                rows.append((source.decode(), int(orjson.loads(payload)["seq"])))
            contents[shard] = rows
        return contents
    finally:
        await redis.aclose()


async def test_three_shards_keep_each_source_in_one_stream_in_order_and_land_every_event_once(
    cluster_env: dict[str, str],
    stack: Stack,
    redis_cluster: LocalRedisCluster,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
) -> None:
    run = f"cl-{uuid.uuid4().hex[:8]}"
    async with app_client_factory(_on_cluster(stack, redis_cluster)) as client:
        await _post_all(client, run)
        contents = await _stream_contents(redis_cluster.url)
        assert all(contents[shard] for shard in range(SHARDS)), "some shard got no source"
        for shard, rows in contents.items():
            for source in {source for source, _ in rows}:
                # The whole source is here, in the order it was sent, and nowhere else.
                assert [seq for s, seq in rows if s == source] == list(range(PER_SOURCE))
                assert all(source not in {s for s, _ in other} for n, other in contents.items() if n != shard)
        stats = (await client.get("/ingest/stats", headers=AUTH)).json()
        assert stats["backlog"] == SOURCES * PER_SOURCE

        for name in ("cl-a", "cl-b"):
            spawn_worker(stack, f"{name}-{run}", **cluster_env)

        async def all_written() -> bool:
            return await _rows_of(stack, run) == SOURCES * PER_SOURCE

        await eventually(all_written, 60, "every event written")
        assert await _distinct_seqs_of(stack, run) == SOURCES * PER_SOURCE

        drained = _stats_say(client, lambda s: s["backlog"] == 0 and s["rows_written"] == SOURCES * PER_SOURCE)
        await eventually(drained, deadline_s(), "the backlog of every shard to drain")


async def test_a_killed_workers_entries_on_every_shard_are_claimed_and_written(
    cluster_env: dict[str, str],
    stack: Stack,
    redis_cluster: LocalRedisCluster,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
) -> None:
    run = f"ck-{uuid.uuid4().hex[:8]}"
    async with app_client_factory(_on_cluster(stack, redis_cluster)) as client:
        # It reads, but neither the batch size nor the timer flushes within the test.
        doomed = spawn_worker(
            stack, f"doomed-{run}", **{**cluster_env, "TENK_INGEST_BATCH": "10000", "TENK_INGEST_FLUSH_MS": "600000"}
        )

        doomed_reads = _stats_say(client, lambda s: s["consumers"] == 1)
        await eventually(doomed_reads, 60, "the doomed worker to join every shard")
        await _post_all(client, run)

        all_held = _stats_say(client, lambda s: s["lag"] == 0 and s["pending"] == SOURCES * PER_SOURCE)
        await eventually(all_held, deadline_s(), "the doomed worker to hold every event")
        doomed.kill()
        assert await _rows_of(stack, run) == 0

        spawn_worker(stack, f"heir-{run}", **{**cluster_env, **FAST_CLAIM})

        async def all_written() -> bool:
            return await _rows_of(stack, run) == SOURCES * PER_SOURCE

        await eventually(all_written, 60, "the heir to claim and write every shard's entries")

        await eventually(_stats_say(client, lambda s: s["backlog"] == 0), deadline_s(), "the backlog to drain")


def _accepts(client: httpx.AsyncClient, batch: list[dict[str, object]]) -> Callable[[], Awaitable[bool]]:
    async def post() -> bool:
        return (await client.post("/events/batch", json=batch, headers=AUTH)).status_code == 202

    return post


@contextmanager
def _replicas_frozen(cluster: LocalRedisCluster) -> Iterator[None]:
    """SIGSTOP every replica: they stay in the cluster, but acknowledge nothing until thawed."""
    replicas = [psutil.Process(pid) for _, role, pid in cluster.members() if role == "slave" and pid is not None]
    assert len(replicas) == 3
    for replica in replicas:
        replica.suspend()
    try:
        yield
    finally:
        for replica in replicas:
            replica.resume()


async def test_replicated_durability_answers_202_only_once_a_replica_has_the_events(
    cluster_env: dict[str, str],
    stack: Stack,
    redis_cluster: LocalRedisCluster,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    run = f"cr-{uuid.uuid4().hex[:8]}"
    async with app_client_factory(
        _on_cluster(stack, redis_cluster, durability="replicated", replica_wait_ms=300)
    ) as client:
        accepted = await client.post("/events/batch", json=_batch(run, 0), headers=AUTH)
        assert accepted.status_code == 202, accepted.text

        with _replicas_frozen(redis_cluster):
            refused = await client.post("/events/batch", json=_batch(run, 1), headers=AUTH)
            single = await client.post("/events", json=_batch(run, 2)[0], headers=AUTH)
        for answer in (refused, single):
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == "not_replicated"
            assert answer.headers["retry-after"] == "1"

        await eventually(_accepts(client, _batch(run, 3)), deadline_s(), "a 202 once the replicas are back", every=0.3)


async def test_a_replicated_append_whose_connection_drops_during_wait_is_never_acknowledged(
    cluster_env: dict[str, str], redis_cluster: LocalRedisCluster
) -> None:
    # The append is answered, then its connection drops while WAIT blocks (the replica is frozen). A
    # WAIT sent again on any other connection has no writes to wait for and answers 1 at once: taken as
    # the append's acknowledgement, a 202 would go out for events no replica holds.
    stream = keys.stream_key(0)
    master = redis_cluster.master_of(stream)
    replica = redis_cluster.replica_of(master)
    [replica_pid] = [pid for port, _, pid in redis_cluster.members() if port == replica and pid is not None]
    entry, _ = parse_one(orjson.dumps({"source": "wait-drop", "ts": "2026-01-02T03:04:05Z", "payload": {}}))
    client = redis_from_url(redis_cluster.url)
    await connect_redis(client)
    producer = StreamProducer(client, max_backlog=1_000, max_backlog_bytes=1 << 20, replica_wait_ms=600_000)
    producer.start()
    frozen = psutil.Process(replica_pid)
    frozen.suspend()
    try:
        append = asyncio.create_task(producer.add([entry]))
        with redis_cluster.admin(master) as admin:
            waiting = await eventually(
                lambda: _client_blocked_in_wait(admin), 30, "the append's WAIT blocked on the master"
            )
            admin.client_kill_filter(_id=waiting)
        with pytest.raises(REDIS_DOWN):
            await append
        assert await client.xlen(stream) == 1  # the append itself went in: only its acknowledgement is refused
    finally:
        frozen.resume()
        await producer.stop()
        await client.aclose()


async def _client_blocked_in_wait(admin: redis.Redis) -> str | None:
    return next((c["id"] for c in admin.client_list() if c["cmd"] == "wait"), None)
