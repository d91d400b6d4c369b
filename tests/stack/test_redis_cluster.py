"""The local Redis Cluster tenk starts itself, and the client TENK_REDIS_URL builds for it."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import pytest
from redis.asyncio import RedisCluster
from redis.crc import key_slot

from harness.stack import _started_on_fresh_ports
from tenk.platform.connections import redis_from_url
from tenk.stack._ports import port_is_bindable
from tenk.stack.redis_cluster import LocalRedisCluster, bus_port, cluster_binaries, free_cluster_ports

pytestmark = pytest.mark.cluster


def test_the_cluster_has_three_masters_each_with_a_replica_and_serves_every_slot(
    redis_cluster: LocalRedisCluster,
) -> None:
    roles = sorted(role for _, role, _ in redis_cluster.members())
    assert roles == ["master"] * 3 + ["slave"] * 3
    assert all(pid is not None for _, _, pid in redis_cluster.members())
    for port in redis_cluster.ports:
        info = redis_cluster.cluster_info(port)
        assert info["cluster_state"] == "ok"
        assert info["cluster_slots_ok"] == "16384"
    masters = [port for port, role, _ in redis_cluster.members() if role == "master"]
    assert all(redis_cluster.replica_of(port) is not None for port in masters)


def test_starting_a_running_cluster_again_changes_nothing(redis_cluster: LocalRedisCluster) -> None:
    before = redis_cluster.members()
    assert redis_cluster.start() is False
    assert redis_cluster.members() == before


async def test_a_cluster_url_gives_a_cluster_client_that_reaches_keys_on_every_master(
    redis_cluster: LocalRedisCluster,
) -> None:
    assert redis_cluster.url.startswith("redis+cluster://")
    redis = redis_from_url(redis_cluster.url)
    try:
        assert isinstance(redis, RedisCluster)
        keys = [f"tenk:test:spread:{n}" for n in range(30)]
        for key in keys:
            await redis.set(key, key)
        nodes = {redis.get_node_from_key(key).port for key in keys}
        assert len(nodes) == 3, "30 keys all landed on fewer than 3 masters"
        assert [await redis.get(key) for key in keys] == [key.encode() for key in keys]
        await redis.delete(*keys[:1])
    finally:
        await redis.aclose()


async def test_flush_empties_every_master(redis_cluster: LocalRedisCluster) -> None:
    redis = redis_from_url(redis_cluster.url)
    try:
        keys = [f"tenk:test:flush:{n}" for n in range(30)]
        for key in keys:
            await redis.set(key, key)
        redis_cluster.flush()
        assert [await redis.get(key) for key in keys] == [None] * len(keys)
    finally:
        await redis.aclose()


def test_catalog_and_ingest_keys_that_scripts_use_together_share_a_slot() -> None:
    from tenk.ingest import keys as ingest
    from tests.catalog import keys as catalog

    for product_id in (1, 42, 10_000_019):
        assert key_slot(catalog.product_key(product_id).encode()) == key_slot(
            catalog.generation_key(product_id).encode()
        )
    for shard in range(8):
        assert key_slot(ingest.stream_key(shard).encode()) == key_slot(ingest.stats_key(shard).encode())
    assert len({key_slot(ingest.stream_key(shard).encode()) for shard in range(8)}) == 8


def _free_high_ports(count: int) -> list[int]:
    """Free ports above 55535, where Redis's default bus port (+10000) does not exist, with free bus ports."""
    candidates = [
        port for port in range(60_000, 65_000, 7) if port_is_bindable(port) and port_is_bindable(bus_port(port))
    ]
    return random.sample(candidates, count)


def test_a_cluster_on_ports_above_55535_starts_with_its_bus_below_them() -> None:
    # `tenk up --topology cluster` puts its nodes at TENK_REDIS_EMBEDDED_PORT + 1.. (63800 by default).
    root = Path(tempfile.mkdtemp(prefix="tenk-hi-", dir="/tmp"))
    cluster = LocalRedisCluster(root / "cluster", _free_high_ports(6), masters=3)
    try:
        cluster.start()
        assert all(cluster.cluster_info(port)["cluster_state"] == "ok" for port in cluster.ports)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_forming_the_cluster_puts_its_password_on_no_command_line(stack_root: Path) -> None:
    # redis-cli as the cluster runs it, through a wrapper that writes down the command line it was given.
    _, cli = cluster_binaries()
    seen = stack_root / "cli-argv"
    wrapper = stack_root / "redis-cli"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {seen}\nexec {cli} "$@"\n')
    wrapper.chmod(0o700)
    cluster = _started_on_fresh_ports(
        lambda attempt: LocalRedisCluster(
            stack_root / f"cluster-{attempt}", free_cluster_ports(6), masters=3, cli_binary=str(wrapper)
        )
    )
    try:
        assert "--cluster" in seen.read_text(), "the cluster was formed by the wrapped redis-cli"
        assert cluster.password not in seen.read_text()
        assert cluster.cluster_info(cluster.ports[0])["cluster_state"] == "ok"
    finally:
        cluster.stop()
