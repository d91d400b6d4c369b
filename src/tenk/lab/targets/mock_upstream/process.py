"""Start and drive a `tenk mock-upstream` process from Python (tests, benchmarks, the lab)."""

from __future__ import annotations

import json
import os
import secrets
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from pydantic import TypeAdapter

from tenk.lab.targets.mock_upstream.profile import Profile, ProfileValues
from tenk.lab.targets.mock_upstream.server import ADMIN_TOKEN_ENV
from tenk.lab.targets.mock_upstream.stats import StatsSnapshot
from tenk.stack import Spawned, start_http_server

# The mock's answers are another process's JSON: checked on arrival, so a changed field fails here, named.
_STATS: TypeAdapter[StatsSnapshot] = TypeAdapter(StatsSnapshot)
_PROFILE: TypeAdapter[ProfileValues] = TypeAdapter(ProfileValues)


@dataclass
class MockUpstreamProcess:
    url: str
    server: Spawned
    admin_token: str

    @property
    def pid(self) -> int:
        return self.server.pid

    @property
    def log(self) -> Path:
        return self.server.log

    def stats(self, symbol: str | None = None) -> StatsSnapshot:
        query = f"?{urlencode({'symbol': symbol})}" if symbol else ""
        return _STATS.validate_json(self._call("GET", f"/stats{query}"))

    def reset_stats(self) -> None:
        self._call("DELETE", "/stats")

    def set_profile(self, **changes: float) -> ProfileValues:
        """PUT /admin/latency with any of p50_ms, p99_ms, error_rate, hang_rate."""
        return _PROFILE.validate_json(self._call("PUT", "/admin/latency", changes))

    def _call(self, method: str, path: str, body: dict[str, float] | None = None) -> bytes:
        """One JSON request; its answer's body. An error status raises urllib's HTTPError. urllib, not
        httpx: the service's image runs the mock and installs no lab-only client."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.admin_token}"}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=5) as response:
            answer: bytes = response.read()
        return answer

    def stop(self) -> None:
        self.server.stop()

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
    """Start the mock on a free port (or `port`) and wait until it listens there and /health answers.

    A free port can be taken before the mock binds it; then, unless `port` was given, another is tried.
    """

    def argv_for(port: int) -> list[str]:
        argv = [
            str(Path(sys.executable).parent / "tenk"),
            "mock-upstream",
            *("--port", str(port), "--p50-ms", str(profile.p50_ms), "--p99-ms", str(profile.p99_ms)),
            *("--error-rate", str(profile.error_rate), "--hang-rate", str(profile.hang_rate)),
        ]
        return argv if seed is None else [*argv, "--seed", str(seed)]

    # A fresh token each start, in the environment (not argv, which every local user can read).
    token = new_admin_token()
    env = {**os.environ, ADMIN_TOKEN_ENV: token}
    server, url = start_http_server("mock-upstream", argv_for, lambda _: log, timeout=timeout_s, port=port, env=env)
    if cpus is not None:
        os.sched_setaffinity(server.pid, cpus)
    return MockUpstreamProcess(url, server, token)


def new_admin_token() -> str:
    return secrets.token_urlsafe(24)
