from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tenk.stack import EmbeddedRedis, PortTakenError, free_port
from tests.conftest import VENV_BIN


def _tenk(data_dir: Path, pg_port: int, redis_port: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "TENK_DATA_DIR": str(data_dir),
        "TENK_PG_PORT": str(pg_port),
        "TENK_REDIS_PORT": str(redis_port),
    }
    return subprocess.run([str(VENV_BIN / "tenk"), *args], env=env, capture_output=True, text=True, timeout=120)


def test_up_is_idempotent_and_down_stops_both(tmp_path: Path) -> None:
    data_dir = Path(tmp_path) / "d"
    pg_port, redis_port = free_port(), free_port()
    try:
        first = _tenk(data_dir, pg_port, redis_port, "up", "--products", "50", "--tasks", "5")
        assert first.returncode == 0, first.stderr
        assert "postgres: started" in first.stdout
        assert "0001_catalog_tasks.sql" in first.stdout
        assert (data_dir / "dev-api-key").read_text().startswith("tk_")
        assert oct((data_dir / "dev-api-key").stat().st_mode & 0o777) == "0o600"

        second = _tenk(data_dir, pg_port, redis_port, "up", "--products", "50", "--tasks", "5")
        assert second.returncode == 0, second.stderr
        assert "postgres: already running" in second.stdout
        assert "redis: already running" in second.stdout
        assert "migrations: up to date" in second.stdout
        assert "seed: 0 products, 0 tasks" in second.stdout

        status = _tenk(data_dir, pg_port, redis_port, "status")
        assert status.stdout.count("running") == 2
    finally:
        _tenk(data_dir, pg_port, redis_port, "down")
    status = _tenk(data_dir, pg_port, redis_port, "status")
    assert status.stdout.count("stopped") == 2
    shutil.rmtree(data_dir, ignore_errors=True)


def test_a_port_held_by_someone_else_gives_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        with pytest.raises(PortTakenError, match=f"port {taken} is taken"):
            EmbeddedRedis(Path(tmp_path) / "r", taken).start()
        result = _tenk(Path(tmp_path) / "d2", taken, free_port(), "up", "--no-seed")
        assert result.returncode != 0
        assert f"port {taken} is taken" in result.stderr
