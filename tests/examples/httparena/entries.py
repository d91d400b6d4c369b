"""Starting HttpArena entries as real servers on a stack's Postgres loaded with HttpArena's database."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.httparena.arena import DATASET

from harness.deadlines import deadline_s
from harness.stack import VENV_BIN
from tenk.stack import Spawned, start_http_server

ENTRY = Path(__file__).resolve().parents[3] / "examples" / "httparena" / "tenk"
# validate.sh waits on this before its checks: every entry answers it.
READY_PATH = "/baseline11?a=1&b=1"


def entry_env(database_url: str, **extra: str) -> dict[str, str]:
    """HttpArena's environment for an entry (its DATABASE_URL and pool hint), the dataset where the repo has it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENK_", "DATABASE_", "REDIS_"))}
    env.update({"DATABASE_URL": database_url, "DATABASE_MAX_CONN": "32", "DATASET_PATH": str(DATASET), **extra})
    return env


def start_tenk_entry(database_url: str, log_dir: Path, workers: int = 1, **extra: str) -> tuple[Spawned, str]:
    """tenk's entry served by its Dockerfile's command (serve.sh), on loopback; the process and its base URL."""
    env = entry_env(database_url, HOST="127.0.0.1", TENK_WORKERS=str(workers), **extra)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return start_http_server(
        "tenk's HttpArena entry",
        lambda port: ["env", f"PORT={port}", "sh", str(ENTRY / "serve.sh")],
        lambda port: log_dir / f"entry-{port}.log",
        health_path=READY_PATH,
        timeout=deadline_s(),
        cwd=ENTRY,
        env=env,
    )
