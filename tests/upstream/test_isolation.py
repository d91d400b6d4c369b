"""A slow vendor cannot take the API down: 2,000 parked quote requests on one API process, while
/ping and a cached /products/{id} keep their latency and the process stays small.

Speed is not asserted here (that is `make bench-upstream`); what is asserted is *isolation*: the same
probe, run with and without the parked load, on the same machine, pinned the same way.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.lab.targets.mock_upstream import MockUpstreamProcess, Profile, start_mock_upstream
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually_blocking

PARKED = 2_000
PATHS = ("/ping", "/products/1")
ROUNDS, PROBES_PER_ROUND = 16, 250
STEADY_AFTER_S = 8.0
# What the parked load may add to a p99 besides 50 %: its ~385 answers/s each take ~0.5 ms of the
# API's loop, and they arrive in bursts, so a probe can queue behind several. Measured loaded p99s for
# /ping: 0.83-0.86 ms quiet (0.32 unloaded), 1.61 ms in a CI run (0.38 unloaded), 5.8-6.5 ms with both
# cores held by busy loops (4.0 unloaded). A loop the parked calls block is far above: a planted 2 ms of
# blocking per answer gave 11.9 ms (0.33 unloaded). A planted 1 ms gave 2.73 ms, inside this allowance;
# the test guards against blocking, not against a slower answer path (that is `make bench-upstream`).
ADDED_MS = 3.0
REPO = Path(__file__).resolve().parents[2]
API_CPU, OTHER_CPUS = "0", {1}


def _pin_tree(pid: int, cpus: str) -> None:
    # -a: every thread, since granian's Rust runtime runs threads of its own.
    for proc in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        subprocess.run(["taskset", "-a", "-cp", cpus, str(proc.pid)], check=True, capture_output=True)


def _tree_rss_mb(pid: int) -> float:
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return sum(p.memory_info().rss for p in procs) / 2**20


class _RawClient:
    """A keep-alive HTTP/1.1 GET over a plain socket: far cheaper than a full client, so the probe
    measures the server rather than itself."""

    def __init__(self, base_url: str) -> None:
        host, port = base_url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def get(self, path: str) -> int:
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: tenk\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            rest += self.sock.recv(65536)
        self.buffer = rest[length:]
        return int(head[9:12])

    def close(self) -> None:
        self.sock.close()


def _p99_ms(client: _RawClient, path: str, count: int) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        status = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        assert status == 200, (path, status)
    samples.sort()
    return samples[int(0.99 * len(samples)) - 1]


def _probe(client: _RawClient) -> dict[str, float]:
    """Each path's p99 in the quietest of several rounds. The machine is shared: other processes can
    only ever add latency, in bursts, so the quietest round is the fair one to compare, and a slowdown
    that the parked load itself causes shows in every round, the quietest included."""
    return {path: min(_p99_ms(client, path, PROBES_PER_ROUND) for _ in range(ROUNDS)) for path in PATHS}


@pytest.fixture
def slow_vendor(tmp_path: Path) -> Iterator[MockUpstreamProcess]:
    with start_mock_upstream(
        Profile(p50_ms=4000, p99_ms=22000), log=tmp_path / "mock.log", seed=1, cpus=OTHER_CPUS, timeout_s=deadline_s()
    ) as mock:
        yield mock


@pytest.fixture
def pinned_here() -> Iterator[None]:
    """Run this test's probes on the API's core, and put the affinity back afterwards.

    The load (the parker and the vendor) has the other core to itself: a probe sharing a core with the
    load generator would measure the load generator. A blocking probe and the API take turns anyway.
    """
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("needs two cores: one for the API, one for the load")
    os.sched_setaffinity(0, {int(API_CPU)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_2000_parked_quotes_leave_ping_and_cached_products_unharmed(
    stack: Stack,
    spawn_api: Callable[..., ServerProcess],
    slow_vendor: MockUpstreamProcess,
    pinned_here: None,
) -> None:
    api = spawn_api(
        stack,
        server="granian",
        TENK_UPSTREAM_URL=slow_vendor.url,
        # Long enough that nothing times out: the point is to hold them all.
        TENK_UPSTREAM_TIMEOUT_S="60",
        TENK_UPSTREAM_MAX_INFLIGHT="4096",
    )
    _pin_tree(api.pid, API_CPU)
    client = _RawClient(api.base_url)
    try:
        _probe(client)  # warm-up: connections, caches, code paths
        unloaded = _probe(client)

        parker = subprocess.Popen(
            [sys.executable, "-m", "tests.upstream.parker", api.base_url, str(PARKED), "120"],
            cwd=REPO,
            stdout=subprocess.PIPE,
        )
        try:
            os.sched_setaffinity(parker.pid, OTHER_CPUS)
            started = time.monotonic()

            def held_in_steady_state() -> int:
                held = int(slow_vendor.stats()["in_flight"])
                return held if held >= PARKED * 0.97 and time.monotonic() - started >= STEADY_AFTER_S else 0

            # Probe in the steady state: all parked, and answers (p50 4 s) arriving at their full rate.
            held = eventually_blocking(
                held_in_steady_state,
                deadline_s(),
                lambda: (
                    f"{PARKED * 0.97:.0f} quote calls parked at the vendor (held: {slow_vendor.stats()['in_flight']})"
                ),
                every=0.2,
            )
            loaded = _probe(client)
            held_after = slow_vendor.stats()["in_flight"]
            rss_mb = _tree_rss_mb(api.pid)
        finally:
            parker.send_signal(signal.SIGTERM)
            out, _ = parker.communicate(timeout=60)
    finally:
        client.close()
    summary = json.loads(out)
    print(f"\nunloaded p99 ms {unloaded}\nloaded p99 ms {loaded}\nparked {held}->{held_after}, RSS {rss_mb:.0f} MB")
    print(f"parker: {summary}")

    # The load was still there when the probe ended. The parker and the vendor share the other core, so on a
    # busy machine they re-park answered calls late: 1,584 of 2,000 were held at the end of one such run. A
    # loop the quote calls block falls much further (a planted 2 ms of blocking per call left 1,104).
    assert held_after >= PARKED * 0.75
    for path, p99 in loaded.items():
        allowed = 1.5 * unloaded[path] + ADDED_MS
        assert p99 <= allowed, f"{path}: p99 {p99:.2f} ms loaded vs {unloaded[path]:.2f} ms unloaded"
    assert rss_mb < 300
    assert set(summary["statuses"]) <= {"200"}, summary
    assert not summary["errors"], summary
