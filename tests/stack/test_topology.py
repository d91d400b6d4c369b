"""`tenk up --topology cluster`, `tenk status`, `tenk restart`, `tenk down`: every member shown, every node
replaced under load with no request failing, and nothing left running."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

from harness.stack import VENV_BIN, free_port_run
from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tenk.stack import free_port, port_is_open
from tests.stack.open_loop import OpenLoop

pytestmark = pytest.mark.cluster

FLEET = {"api-1", "api-2", "worker-1", "worker-2", "haproxy"}
# A correctness load, far below what two nodes take: every request must be answered, whatever the rate.
RESTART_RATE = 100.0
# A vendor slow enough that every node always has calls to it in flight (20 a second, 0.3 s each).
VENDOR_P50_MS, VENDOR_P99_MS = 300.0, 500.0


def _tenk(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "tenk"), *args], env=env, capture_output=True, text=True, timeout=300)


def _status_rows(output: str) -> dict[str, dict[str, str]]:
    lines = output.strip().splitlines()
    header = lines[0].split()
    assert header[:5] == ["NAME", "ROLE", "PID", "PORT", "STATE"], output
    rows = {}
    for line in lines[1:]:
        cells = line.split(maxsplit=5)
        rows[cells[0]] = dict(zip(header, cells + ["-"] * (6 - len(cells)), strict=True))
    return rows


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _restart_every_node_under_load(
    env: dict[str, str], front: str, stack_root: Path, rows: dict[str, dict[str, str]]
) -> None:
    """`tenk restart` on the cluster's own stores (Redis Cluster, PgBouncer, a replica) while requests
    arrive at a constant rate through HAProxy: every node is replaced, and no request fails."""
    auth = {"Authorization": f"Bearer {(stack_root / 'dev-api-key').read_text().strip()}"}

    def request_for(i: int) -> tuple[str, str, object, dict[str, str]]:
        # Reads, a write and an event in every ten, and slow vendor calls (a fresh symbol each, so
        # never from the quote cache) that keep requests in flight at every node when it is stopped:
        # only a drain lets those finish. A write lost to a closing node is a failure too.
        if i % 10 == 0:
            return "PATCH", "/products/7", {"stock": i}, auth
        if i % 10 == 5:
            return "POST", "/events", {"source": "rolling", "ts": "2026-01-02T03:04:05Z", "payload": {"i": i}}, auth
        if i % 5 == 2:
            return "GET", f"/quotes/R{i}", None, {}
        return "GET", f"/products/{1 + i % 50}", None, {}

    load = OpenLoop(front, RESTART_RATE, request_for)
    load.start()
    try:
        restarted = _tenk(env, "restart")
    finally:
        load.stop()
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert [line.split(":")[0] for line in restarted.stdout.splitlines()] == ["api-1", "api-2"], restarted.stdout
    for name in ("api-1", "api-2"):
        assert f"(pid {rows[name]['PID']} -> " in restarted.stdout, restarted.stdout
    assert load.sent > RESTART_RATE, "the load did not run through the restarts"
    assert not load.failures, f"{len(load.failures)} of {load.sent} requests failed: {load.failures[:10]}"
    assert load.answered == load.sent


def test_up_cluster_shows_every_member_and_down_leaves_nothing_running(
    stack_root: Path, mock: MockUpstreamProcess
) -> None:
    mock.set_profile(p50_ms=VENDOR_P50_MS, p99_ms=VENDOR_P99_MS)
    env = {
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "TENK_DATA_DIR": str(stack_root),
        "TENK_DATABASE_EMBEDDED_PORT": str(pg_port := free_port_run(3)),
        "TENK_REDIS_EMBEDDED_PORT": str(redis_port := free_port_run(7, cluster_bus=True)),
        "TENK_PORT": str(free_port()),
        "TENK_LOG_LEVEL": "WARNING",
        "TENK_UPSTREAM_URL": mock.url,
    }
    members = {
        "postgres",
        "postgres-replica",
        "pgbouncer",
        *(f"redis-{port}" for port in range(redis_port + 1, redis_port + 7)),
        *FLEET,
    }
    try:
        up = _tenk(env, "up", "--topology", "cluster", "--products", "50", "--tasks", "5")
        assert up.returncode == 0, up.stdout + up.stderr
        status = _tenk(env, "status")
        assert status.returncode == 0, status.stderr
        rows = _status_rows(status.stdout)
        assert set(rows) == members, status.stdout
        assert all(row["STATE"] == "up" for row in rows.values()), status.stdout
        assert rows["api-1"]["READY"] == rows["api-2"]["READY"] == "ready, in rotation", status.stdout
        assert rows["haproxy"]["PORT"] == env["TENK_PORT"]
        assert rows["pgbouncer"]["PORT"] == str(pg_port + 1)
        assert (
            sorted(row["ROLE"] for name, row in rows.items() if name.startswith("redis-"))
            == ["redis-master"] * 3 + ["redis-slave"] * 3
        )
        front = f"http://127.0.0.1:{env['TENK_PORT']}"
        assert httpx.get(f"{front}/products/1", timeout=10).status_code == 200
        _restart_every_node_under_load(env, front, stack_root, rows)
        rows = _status_rows(_tenk(env, "status").stdout)
        assert rows["api-1"]["READY"] == rows["api-2"]["READY"] == "ready, in rotation", rows
        # Every member reaches Postgres (directly, through PgBouncer, on the replica) as the app's role.
        for member in ("api-1", "worker-1"):
            member_env = psutil.Process(int(rows[member]["PID"])).environ()
            for variable in ("TENK_DATABASE_URL", "TENK_DATABASE_DIRECT_URL", "TENK_DATABASE_REPLICA_URLS"):
                assert urlsplit(member_env[variable]).username == "tenk", f"{member} {variable}"
        processes = [proc for row in rows.values() for proc in _tree(int(row["PID"]))]
        ports = [int(row["PORT"]) for row in rows.values() if row["PORT"] != "-"]
    finally:
        down = _tenk(env, "down")
    assert down.returncode == 0, down.stderr
    assert {line.split(":")[0] for line in down.stdout.splitlines()} == members, down.stdout
    _, alive = psutil.wait_procs(processes, timeout=10)
    assert not alive, f"still running after `tenk down`: {alive}"
    assert not [port for port in ports if port_is_open(port)]
    after = _tenk(env, "status")
    assert "running" not in after.stdout, after.stdout
