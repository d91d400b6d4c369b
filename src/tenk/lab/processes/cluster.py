"""`topology = "cluster"`: the local cluster's stores, and a rung's API nodes behind HAProxy.

The stores are those of `tenk up --topology cluster` (tenk.stack.topology): the primary, its
replica, PgBouncer and a Redis Cluster. As with the single stack, the lab starts the ones not
running, reuses the others, and stops only what it started. The nodes are the lab's own, one set
per rung repeat like the single target: `apis` processes, each pinned to the rung's whole CPU set,
with HAProxy (on the helpers' cores) in front; k6 aims at HAProxy.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from tenk.lab.cpus import cpu_set, pin_tree
from tenk.lab.definition.ladder import RungConfig
from tenk.lab.errors import LabError, NotReadyError
from tenk.lab.processes.servers import (
    READY_TIMEOUT_S,
    ProcessSet,
    StackInfo,
    Started,
    given_database,
    stack_settings,
    stopped_on_failure,
    target_argv,
    wait_ready,
)
from tenk.stack import free_port
from tenk.stack.fleet import in_rotation
from tenk.stack.haproxy import Backend, check_config, haproxy_argv, haproxy_config
from tenk.stack.topology import Store, cluster_stores

_POLL_S = 0.05


def ensure_cluster(env: Mapping[str, str], helper_cpus: str | None) -> StackInfo:
    """The cluster's stores up, migrated and seeded; their processes moved onto the helpers' cores."""
    settings = stack_settings(env)
    stack_env = {"TENK_DATA_DIR": str(settings.data_dir.resolve())}
    stores = cluster_stores(settings)
    started: list[Store] = []
    with stopped_on_failure(started):
        try:
            for store in stores:
                running = all(status.up for status in store.statuses())
                store.start()
                stack_env.update(store.env())
                if not running:
                    started.append(store)
        except Exception as exc:
            raise LabError(f"could not start the cluster's stores: {exc}") from exc
        url = stack_env.get("TENK_DATABASE_URL") or ""
        try:
            data = given_database(url, stack_env.get("TENK_DATABASE_DIRECT_URL") or url, "the cluster's")
        except Exception as exc:
            raise LabError(f"could not migrate/seed the cluster's primary: {exc}") from exc
    pids = {s.name: s.pid for store in stores for s in store.statuses() if s.pid is not None}
    if helper_cpus:
        for pid in pids.values():
            pin_tree(pid, cpu_set(helper_cpus))
    return StackInfo(stack_env, list(started), pids, data)


def start_nodes(
    processes: ProcessSet, config: RungConfig, env: Mapping[str, str], helper_cpus: str | None
) -> tuple[dict[str, int], str]:
    """`config.apis` API nodes and HAProxy in front of them; returns node name -> pid, and HAProxy's URL."""
    ports = {f"api-{i}": free_port() for i in range(1, config.apis + 1)}
    # Started together: start-up is mostly imports, so N nodes take about one's time.
    nodes = [processes.start(name, target_argv(config, port, env), env, config.cpus) for name, port in ports.items()]
    for node in nodes:
        wait_ready(node, f"http://127.0.0.1:{ports[node.name]}/health")
    front, stats = free_port(), free_port()
    path = processes.log_dir / "haproxy.cfg"
    path.write_text(haproxy_config(front, [Backend(name, port) for name, port in ports.items()], stats))
    try:
        check_config(path)
    except (OSError, RuntimeError) as exc:
        raise LabError(f"HAProxy cannot run here: {exc}") from None
    balancer = processes.start("haproxy", haproxy_argv(path), env, helper_cpus)
    _wait_in_rotation(balancer, stats, set(ports))
    return {node.name: node.pid for node in nodes}, f"http://127.0.0.1:{front}"


def _wait_in_rotation(balancer: Started, stats_port: int, names: set[str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        up = in_rotation(stats_port)
        if names <= {name for name, ok in up.items() if ok}:
            return
        if balancer.process.poll() is not None or time.monotonic() > deadline:
            raise NotReadyError(
                f"HAProxy did not put every node in rotation ({up or 'no stats'}).\n"
                f"--- last lines of {balancer.log} ---\n{balancer.log_tail()}"
            )
        time.sleep(_POLL_S)  # polling HAProxy's health checks, with a deadline
