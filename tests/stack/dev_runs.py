"""`tenk dev` as `make run` runs it, on free ports in a private data dir, with any tenk executable."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
import psutil

from tenk.stack import free_port
from tests.support.waiting import eventually_blocking

# A fresh machine has no redis-server of its own: as root, a private mount namespace in which the system's
# redis-server and valkey-server are /dev/null (not executable), so only the packages' server can serve.
HIDE_SYSTEM_REDIS = (
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    'for s in /usr/bin/redis-server /usr/bin/valkey-server; do [ -e "$s" ] && mount --bind /dev/null "$s"; done; '
    'exec "$@"',
    "hide-system-redis",
)

# Measured here: `tenk dev` reached /ready in about 10 s with this seed while other suites ran; the deadline
# leaves room for a much busier machine and a fresh venv's first imports.
READY_WITHIN_S = 120.0
SEED = ("--products", "200", "--tasks", "20")


@dataclass
class DevRun:
    process: subprocess.Popen[bytes]
    base_url: str
    data_dir: Path
    log: Path
    env: dict[str, str]

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self, marker: str) -> list[psutil.Process]:
        """Our direct children whose command line contains `marker` (e.g. "worker")."""
        found = []
        for child in psutil.Process(self.process.pid).children():
            try:
                if marker in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.Error:
                continue
        return found

    def key(self) -> str:
        return (self.data_dir / "dev-api-key").read_text().strip()

    def stop(self) -> int:
        """Ctrl-C, as a developer would press it; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def down(self, tenk: Path) -> None:
        subprocess.run([str(tenk), "down"], env=self.env, capture_output=True, timeout=120)


def _ready_or_exited(run: DevRun) -> Literal["ready", "exited"] | None:
    """A check: "ready" once /ready answers 200, "exited" if `tenk dev` exited (a port was taken: the caller
    retries)."""
    if run.process.poll() is not None:
        return "exited"
    try:
        if httpx.get(run.base_url + "/ready", timeout=2).status_code == 200:
            return "ready"
    except httpx.HTTPError:
        pass
    return None


def _ready_or_exited_in_time(run: DevRun) -> Literal["ready", "exited"]:
    # Outside start_dev's loop, so that the checks bind this attempt's run.
    return eventually_blocking(
        lambda: _ready_or_exited(run),
        READY_WITHIN_S,
        lambda: f"tenk dev to be ready:\n{run.log_text()[-4000:]}",
        every=0.2,
    )


def start_dev(
    tenk: Path,
    data_dir: Path,
    attempts: int = 3,
    mock_upstream: bool = False,
    sigint_ignored: bool = False,
    wrapper: tuple[str, ...] = (),
) -> DevRun:
    """`tenk dev` until /ready; on new ports when one was taken before the stack could bind it.

    With `mock_upstream`, `tenk dev` runs its mock vendor too, on a free port rather than the default 9100.
    With `sigint_ignored`, it starts with SIGINT ignored, as a background job of a script does.
    `wrapper` comes before the command (e.g. `HIDE_SYSTEM_REDIS`); it must exec it.
    """
    for attempt in range(attempts):
        api_port = free_port()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "TENK_DATA_DIR": str(data_dir),
            "TENK_DATABASE_EMBEDDED_PORT": str(free_port()),
            "TENK_REDIS_EMBEDDED_PORT": str(free_port()),
            "TENK_PORT": str(api_port),
            "TENK_SERVER": "uvicorn",
            # A vendor address nobody serves: no mock on the default port, which other runs may hold.
            "TENK_UPSTREAM_URL": f"http://127.0.0.1:{free_port()}",
            "TENK_LOG_LEVEL": "INFO",
            "TENK_UPSTREAM_MOCK": "true" if mock_upstream else "false",
        }
        log = data_dir.parent / f"{data_dir.name}-dev-{attempt}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [*wrapper, str(tenk), "dev", *SEED],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=ignore_sigint if sigint_ignored else None,
            )
        run = DevRun(process, f"http://127.0.0.1:{api_port}", data_dir, log, env)
        if _ready_or_exited_in_time(run) == "ready":
            return run
        if "is taken" not in run.log_text():
            raise RuntimeError(f"tenk dev exited with {process.returncode}:\n{run.log_text()[-4000:]}")
        subprocess.run([str(tenk), "down"], env=env, capture_output=True, timeout=120)
    raise RuntimeError(f"tenk dev found no free ports in {attempts} attempts")


def read_write_and_event(run: DevRun, within_s: float = 60.0) -> None:
    """What a new user tries first: a read, a write, and an event that reaches Postgres."""
    auth = {"Authorization": f"Bearer {run.key()}"}
    with httpx.Client(base_url=run.base_url, timeout=10) as client:
        product = client.get("/products/7")
        assert product.status_code == 200, product.text
        patched = client.patch("/products/7", json={"stock": product.json()["stock"] + 1}, headers=auth)
        assert patched.status_code == 200, patched.text
        event_id = str(uuid.uuid4())
        body = {"source": "smoke", "ts": "2026-01-02T03:04:05Z", "payload": {"n": 1}, "event_id": event_id}
        accepted = client.post("/events", json=body, headers=auth)
        assert accepted.status_code == 202, accepted.text
        eventually_blocking(
            lambda: client.get(f"/events/{event_id}", headers=auth).status_code == 200,
            within_s,
            lambda: f"the event to be written:\n{run.log_text()[-3000:]}",
        )


def ignore_sigint() -> None:
    """In a child before exec: SIGINT ignored, which exec keeps (what `cmd &` in a script gives `cmd`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def dev_run(
    tenk: Path,
    data_dir: Path,
    mock_upstream: bool = False,
    sigint_ignored: bool = False,
    wrapper: tuple[str, ...] = (),
) -> Iterator[DevRun]:
    run = start_dev(tenk, data_dir, mock_upstream=mock_upstream, sigint_ignored=sigint_ignored, wrapper=wrapper)
    try:
        yield run
    finally:
        run.stop()
        run.down(tenk)
