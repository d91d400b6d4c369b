"""A ladder on `topology = "cluster"`: the lab starts the cluster's stores and each rung's API nodes
behind HAProxy, k6 aims at HAProxy, and the results give CPU per request for each node and every
member, with a ceiling named. A tiny fixed rate: this checks the wiring, it measures nothing."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.stack import free_port_run
from tenk.lab.definition.ladder import load_ladder
from tenk.lab.measuring.options import RunOptions
from tenk.lab.results.record import run_ladder
from tenk.stack import port_is_open

pytestmark = pytest.mark.cluster
TARGET_CPU = sorted(os.sched_getaffinity(0))[0]

LADDER = f"""
name = "cluster-tiny"
topology = "cluster"
repeats = 1
[defaults]
target = "tenk"
cpus = "{TARGET_CPU}"
mix = "product"
rate = 5
duration_s = 3
warmup_s = 0
slo_p99_ms = 5000
[[rung]]
label = "1 node"
[[rung]]
label = "2 nodes"
apis = 2
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], list[int]]]:
    root = tmp_path_factory.mktemp("lab")
    # A short data dir: the stores' Unix sockets live in it.
    stack_root = Path(tempfile.mkdtemp(prefix="tenk-lc-", dir="/tmp"))
    (root / "cluster.toml").write_text(LADDER)
    pg_port, redis_port = free_port_run(3), free_port_run(7, cluster_bus=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith("TENK_")}
    env.update({
        "TENK_DATA_DIR": str(stack_root),
        "TENK_DATABASE_EMBEDDED_PORT": str(pg_port),
        "TENK_REDIS_EMBEDDED_PORT": str(redis_port),
        "TENK_LOG_LEVEL": "WARNING",
        "TENK_LAB_CPU_BUDGET": "none",  # the suite's ladders run unbudgeted (tests/conftest.py)
    })  # fmt: skip
    try:
        out = run_ladder(load_ladder(root / "cluster.toml"), RunOptions(results_root=root, base_env=env))
        ports = [*range(pg_port, pg_port + 3), *range(redis_port + 1, redis_port + 7)]
        yield json.loads((out / "results.json").read_text()), ports
    finally:
        shutil.rmtree(stack_root, ignore_errors=True)


def test_each_rung_gives_cpu_ms_per_request_for_each_of_its_api_nodes(run: tuple[dict[str, Any], list[int]]) -> None:
    results, _ = run
    one, two = results["rungs"]
    assert set(one["cpu_ms_per_node"]) == {"api-1"}
    assert set(two["cpu_ms_per_node"]) == {"api-1", "api-2"}
    assert two["server"]["processes"] >= 2
    # The nodes together are the target: their figures add up to its figure (each is rounded).
    assert sum(two["cpu_ms_per_node"].values()) == pytest.approx(two["cpu_ms"]["target"], abs=0.01)
    assert all(value > 0 for value in two["cpu_ms_per_node"].values()), two["cpu_ms_per_node"]


def test_the_balancer_and_every_store_member_are_sampled(run: tuple[dict[str, Any], list[int]]) -> None:
    results, ports = run
    roles = set(results["rungs"][1]["server"]["roles_cores_mean"])
    redis = {f"redis-{port}" for port in ports[3:]}
    assert {"haproxy", "pgbouncer", "postgres", "postgres-replica", "k6", *redis} <= roles, roles
    assert not roles & {"api-1", "api-2", "target"}


def test_every_rung_names_its_ceiling_and_the_stores_it_started_are_stopped(
    run: tuple[dict[str, Any], list[int]],
) -> None:
    results, ports = run
    for rung in results["rungs"]:
        assert rung["bottleneck"]["kind"] in ("none", "target", "generator", "dependency", "neighbours", "undetermined")
        assert rung["verdict"]["ceiling"], rung["label"]
        assert rung["figures"]["requests"] > 0, rung["label"]
    assert not [port for port in ports if port_is_open(port)]
