"""Fixtures of the ingest tests: a Redis Cluster environment (the worker fixture is tests.support.workers)."""

from __future__ import annotations

import pytest

from tenk.stack.redis_cluster import LocalRedisCluster
from tests.ingest.streams import CLUSTER_SHARDS


@pytest.fixture
def cluster_env(redis_cluster: LocalRedisCluster) -> dict[str, str]:
    """An empty cluster, and the environment that points tenk processes at it, in CLUSTER_SHARDS shards."""
    redis_cluster.flush()
    shards = str(CLUSTER_SHARDS)
    return {"TENK_REDIS_URL": redis_cluster.url, "TENK_INGEST_SHARDS": shards, "TENK_INGEST_FLUSH_MS": "20"}
