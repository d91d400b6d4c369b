"""`tenk up --topology cluster`, `tenk status`, `tenk down`: every member shown, and nothing left running."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

from tenk.stack import free_port, port_is_open
from tests.conftest import VENV_BIN, free_port_run

pytestmark = pytest.mark.cluster

FLEET = {"api-1", "api-2", "worker-1", "worker-2", "haproxy"}


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


def test_up_cluster_shows_every_member_and_down_leaves_nothing_running(stack_root: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "TENK_DATA_DIR": str(stack_root),
        "TENK_DATABASE_EMBEDDED_PORT": str(pg_port := free_port_run(3)),
        "TENK_REDIS_EMBEDDED_PORT": str(redis_port := free_port_run(7, bus_offset=10_000)),
        "TENK_PORT": str(free_port()),
        "TENK_LOG_LEVEL": "WARNING",
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
        assert httpx.get(f"http://127.0.0.1:{env['TENK_PORT']}/products/1", timeout=10).status_code == 200
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
