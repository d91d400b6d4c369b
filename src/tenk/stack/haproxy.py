"""HAProxy in front of the API nodes: one front port, round robin, health checks on `/ready`.

The checks are what make a rolling restart clean: a node told to stop answers `/ready` with 503
for `TENK_DRAIN_S` (tenk.ops.drain) and HAProxy takes it out of rotation within `FALL` checks, before
its listener closes. `drain_s_for` says how long that takes, for the fleet to set TENK_DRAIN_S.

No `option redispatch` and no retries of requests on other nodes: a node that closed its listener
while still in rotation makes requests fail visibly, instead of being papered over, so the
rolling-restart test proves the drain and not the balancer's retries.

HAProxy comes from Debian (`make system-deps` installs it as root).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "the cluster topology needs HAProxy: `sudo apt-get install haproxy` (or `make system-deps` as root)"

CHECK_INTERVAL_MS = 250
# Three failed checks in a row take a node out, two good ones bring it back: a node merely slow to answer
# on a busy machine stays in rotation (were it the last one, clients would get 503 from HAProxy).
FALL = 3
RISE = 2
CHECK_TIMEOUT_S = 2


class HAProxyMissingError(RuntimeError):
    """No haproxy binary on PATH."""


def haproxy_path() -> str:
    found = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if Path(p).exists()), None)
    if found is None:
        raise HAProxyMissingError(INSTALL_HINT)
    return found


def drain_s_for(check_interval_ms: int = CHECK_INTERVAL_MS, fall: int = FALL) -> float:
    """How long a stopping node must keep serving: the checks that take it out, four times over, as
    a busy machine can delay a check or its answer."""
    return 4 * (fall + 1) * check_interval_ms / 1000


@dataclass(frozen=True)
class Backend:
    name: str
    port: int


def haproxy_config(front_port: int, backends: list[Backend], stats_port: int, host: str = "127.0.0.1") -> str:
    """The balancer, and a stats page on `stats_port` (`/stats;csv`: which nodes are in rotation)."""
    servers = "\n".join(f"    server {b.name} {host}:{b.port} check" for b in backends)
    return f"""\
global
    maxconn 4096
    log stdout format raw local0

defaults
    mode http
    log global
    option httplog
    # Only failed or abnormal requests are logged: the log says what went wrong in a test, at no cost otherwise.
    option dontlog-normal
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 10s
    timeout check {CHECK_TIMEOUT_S}s

frontend stats
    bind {host}:{stats_port}
    stats enable
    stats uri /stats

frontend api
    bind {host}:{front_port}
    default_backend apis

backend apis
    balance roundrobin
    option httpchk GET /ready
    http-check expect status 200
    default-server inter {CHECK_INTERVAL_MS}ms fall {FALL} rise {RISE}
{servers}
"""


def check_config(path: Path) -> None:
    """Raise with HAProxy's own words when it would refuse the config."""
    result = subprocess.run([haproxy_path(), "-c", "-q", "-f", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"haproxy refused {path}:\n{result.stdout}{result.stderr}")


def haproxy_argv(config: Path) -> list[str]:
    # -db: stay in the foreground, so that the PID we record is HAProxy's own.
    return [haproxy_path(), "-db", "-f", str(config)]
