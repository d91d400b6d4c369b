"""Two API nodes behind HAProxy on a stack of their own: no node serves an old row after a write, and a
rolling restart under constant load fails no request."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.clients import AUTH
from harness.stack import Stack, own_stack
from tenk.stack import PortTakenError, free_port
from tenk.stack.fleet import Fleet
from tests.stack.open_loop import OpenLoop
from tests.support.waiting import eventually

pytestmark = pytest.mark.cluster

NODE_ENV = {
    # A local TTL far longer than the test: a node can only drop its copy through the invalidation.
    "TENK_CATALOG_LOCAL_TTL_S": "300",
    # These tests prove the drain and the invalidation, not the breakers: a Redis call slowed past the
    # default 0.25 s by a starved machine would open the Redis breaker and shed load (503) on its own.
    "TENK_REDIS_TIMEOUT_S": "3",
}
# The invalidation reaches the other node through Redis pub/sub, after the writer's answer: it lands within
# milliseconds; this bound only keeps a lost one from hanging the test (as in tests/catalog/test_invalidation.py).
CONVERGE_S = 1.0
# A correctness load, far below what two nodes take: every request must be answered, whatever the rate.
RATE = 100.0


@pytest.fixture(scope="module")
def cluster_stack() -> Iterator[Stack]:
    with own_stack("tenk-fleet-") as stack:
        yield stack


@pytest.fixture(scope="module")
def fleet(cluster_stack: Stack) -> Iterator[Fleet]:
    env = cluster_stack.env(**NODE_ENV)
    for attempt in range(3):
        started = Fleet(cluster_stack.root / "cluster", free_port(), env, apis=2, workers=0)
        try:
            started.start()
            break
        except PortTakenError:
            if attempt == 2:
                raise
    try:
        yield started
    finally:
        started.stop()


def _health_changes(path: Path) -> str:
    """HAProxy's log without its request lines: when each node left and rejoined rotation, and why."""
    return "\n".join(line for line in path.read_text(errors="replace").splitlines() if "Server apis/" in line)


def _nodes(fleet: Fleet) -> dict[str, str]:
    return {m.name: f"http://127.0.0.1:{m.port}" for m in fleet.members() if m.role == "api"}


async def _read_until_stopped(url: str, product_id: int, seen: list[int], stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        while not stop.is_set():
            answer = await http.get(f"{url}/products/{product_id}")
            assert answer.status_code == 200, answer.text
            seen.append(answer.json()["stock"])


async def _all_serve(http: httpx.AsyncClient, nodes: dict[str, str], product_id: int, stock: int) -> None:
    """Until every node (name: URL) serves `stock`: CONVERGE_S for them all, not for each."""
    stale = dict(nodes)

    async def converged() -> bool:
        for name, url in list(stale.items()):
            if (await http.get(f"{url}/products/{product_id}")).json()["stock"] == stock:
                del stale[name]
        return not stale

    await eventually(converged, CONVERGE_S, lambda: f"{', '.join(stale)} to serve stock {stock}", every=0.01)


async def _write_and_watch(fleet: Fleet, product_id: int, writes: int) -> tuple[dict[str, list[int]], int]:
    nodes = _nodes(fleet)
    writer_url = nodes["api-1"]
    everyone = {**nodes, "lb": fleet.url}
    async with httpx.AsyncClient(timeout=10) as http:
        # Every cache holds the row before the first write: each node's LRU, and Redis.
        for url in everyone.values():
            for _ in range(3):
                assert (await http.get(f"{url}/products/{product_id}")).status_code == 200
        base = (await http.get(f"{writer_url}/products/{product_id}")).json()["stock"]
        # Readers that never pause, on each node, so that cache fills race every write.
        seen: dict[str, list[int]] = {name: [] for name in nodes}
        stop = asyncio.Event()
        readers = [asyncio.create_task(_read_until_stopped(nodes[n], product_id, seen[n], stop)) for n in nodes]
        try:
            for step in range(1, writes + 1):
                wanted = base + step
                written = await http.patch(f"{writer_url}/products/{product_id}", json={"stock": wanted}, headers=AUTH)
                assert written.status_code == 200, written.text
                await _all_serve(http, everyone, product_id, wanted)
        finally:
            stop.set()
            await asyncio.gather(*readers)
        final = base + writes
        for name, url in everyone.items():
            for _ in range(20):
                stock = (await http.get(f"{url}/products/{product_id}")).json()["stock"]
                assert stock == final, f"{name} went back to {stock} after serving {final}"
    return seen, base


def test_a_write_through_one_node_is_never_served_stale_by_another_node(fleet: Fleet) -> None:
    writes = 20
    seen, base = asyncio.run(_write_and_watch(fleet, product_id=42, writes=writes))
    for name, stocks in seen.items():
        assert stocks, f"{name} was never read"
        # Stocks only grow: a node that served a newer one and then an older one had put an old row back.
        went_back = [(a, b) for a, b in itertools.pairwise(stocks) if b < a]
        assert not went_back, f"{name} served an older stock after a newer one: {went_back[:5]}"
        assert stocks[-1] == base + writes


def test_every_node_restarted_in_turn_under_constant_load_fails_no_request(fleet: Fleet) -> None:
    def request_for(i: int) -> tuple[str, str, object, dict[str, str]]:
        # Mostly reads across the catalog, and every tenth a write: a write lost to a closing node is a failure too.
        if i % 10 == 0:
            return "PATCH", "/products/7", {"stock": i}, AUTH
        return "GET", f"/products/{1 + i % 200}", None, {}

    load = OpenLoop(fleet.url, RATE, request_for)
    load.start()
    try:
        for name in _nodes(fleet):
            before = fleet.member(name)
            after = fleet.restart(name)
            assert after.pid != before.pid
    finally:
        load.stop()
    assert load.sent > RATE, "the load did not run through the restarts"
    assert not load.failures, (
        f"{len(load.failures)} of {load.sent} requests failed: {load.failures[:10]}\n"
        f"HAProxy's health checks:\n{_health_changes(fleet.run_dir / 'haproxy.log')}"
    )
    assert load.answered == load.sent
