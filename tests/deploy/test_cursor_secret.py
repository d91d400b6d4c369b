"""Replicas share one cursor secret: a page cursor from one `tenk serve` is good on another, and a
deployment that names no secret refuses to start instead of inventing one per process."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from harness.deadlines import deadline_s
from harness.stack import VENV_BIN, Stack
from tests.support.servers import ServerProcess


def test_a_cursor_from_one_replica_pages_on_another(
    stack: Stack, spawn_api: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    # Each replica has its own data dir, as each pod has its own emptyDir: nothing shared but the settings.
    first, second = (
        spawn_api(stack, TENK_DATA_DIR=str(tmp_path / pod), TENK_DEV_FALLBACK="false") for pod in ("a", "b")
    )
    page = httpx.get(f"{first.base_url}/tasks", params={"limit": 2}).json()
    assert page["next"]
    on_second, on_first = (
        httpx.get(f"{replica.base_url}/tasks", params={"limit": 2, "after": page["next"]})
        for replica in (second, first)
    )
    assert on_second.status_code == 200, on_second.text
    assert on_second.json() == on_first.json()
    assert min(item["id"] for item in on_second.json()["items"]) > max(item["id"] for item in page["items"])


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"], ["migrate"]])
@pytest.mark.parametrize(
    ("missing", "named"),
    [({"TENK_CURSOR_SECRET": ""}, "TENK_CURSOR_SECRET"), ({"TENK_API_KEYS": ""}, "TENK_API_KEYS")],
)
def test_a_deployment_without_its_secrets_refuses_to_start(
    stack: Stack, tmp_path: Path, command: list[str], missing: dict[str, str], named: str
) -> None:
    env = stack.env(TENK_DATA_DIR=str(tmp_path), TENK_DEV_FALLBACK="false", **missing)
    done = subprocess.run(
        [str(VENV_BIN / "tenk"), *command], env=env, capture_output=True, text=True, timeout=deadline_s()
    )
    assert done.returncode != 0
    assert named in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cursor-secret").exists()
