"""The stock FastAPI crud entry the bench measures tenk's against passes HttpArena's crud checks too: the two
are measured doing the same work."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.httparena import validation
from benchmarks.httparena.entries import entries

from harness.deadlines import deadline_s
from harness.stack import VENV_BIN
from tenk.stack import start_http_server
from tests.examples.httparena.entries import READY_PATH, entry_env

pytestmark = pytest.mark.timeout(120)


def test_the_stock_fastapi_crud_entry_passes_httparena_s_crud_checks(arena_database: str, tmp_path: Path) -> None:
    # In the suite's environment (its FastAPI and uvicorn), not the pinned one the bench makes for it.
    command = entries()["fastapi-crud"].command()
    command[0] = str(VENV_BIN / "uvicorn")
    server, base_url = start_http_server(
        "stock crud entry",
        lambda port: [part.replace("{port}", str(port)).replace("{workers}", "1") for part in command],
        lambda port: tmp_path / f"stock-{port}.log",
        health_path=READY_PATH,
        timeout=deadline_s(),
        env=entry_env(arena_database),
    )
    try:
        assert validation.failures(base_url, "crud") == []
    finally:
        server.stop()
