"""Start and drive a `tenk mock-upstream` process from Python (tests, benchmarks, the lab)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tenk.lab.mock_upstream.profile import Profile
from tenk.stack import free_port


@dataclass
class MockUpstreamProcess:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stats(self, symbol: str | None = None) -> dict[str, Any]:
        params = {"symbol": symbol} if symbol else None
        body: dict[str, Any] = httpx.get(f"{self.url}/stats", params=params, timeout=5).raise_for_status().json()
        return body

    def reset_stats(self) -> None:
        httpx.delete(f"{self.url}/stats", timeout=5).raise_for_status()

    def set_profile(self, **changes: float) -> dict[str, Any]:
        """PUT /admin/latency with any of p50_ms, p99_ms, error_rate, hang_rate."""
        body: dict[str, Any] = httpx.put(f"{self.url}/admin/latency", json=changes, timeout=5).raise_for_status().json()
        return body

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def __enter__(self) -> MockUpstreamProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def start_mock_upstream(
    profile: Profile,
    *,
    log: Path,
    port: int | None = None,
    seed: int | None = 1,
    cpus: set[int] | None = None,
    timeout_s: float = 15.0,
) -> MockUpstreamProcess:
    """Start the mock on a free port (or `port`) and wait until /health answers."""
    port = port or free_port()
    argv = [
        str(Path(sys.executable).parent / "tenk"),
        "mock-upstream",
        "--port",
        str(port),
        "--p50-ms",
        str(profile.p50_ms),
        "--p99-ms",
        str(profile.p99_ms),
        "--error-rate",
        str(profile.error_rate),
        "--hang-rate",
        str(profile.hang_rate),
    ]
    if seed is not None:
        argv += ["--seed", str(seed)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if cpus is not None:
        os.sched_setaffinity(process.pid, cpus)
    mock = MockUpstreamProcess(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mock-upstream exited with {process.returncode}: {log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{mock.url}/health", timeout=0.5).status_code == 200:
                return mock
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    mock.stop()
    raise TimeoutError(f"mock-upstream did not answer on {mock.url} within {timeout_s}s")
