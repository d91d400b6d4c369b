"""How `tenk serve` launches each ASGI server. Also used by the lab to start targets the same way."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tenk.ops.tracing import app_factory
from tenk.settings import ServerName

# Parked requests are cheap in asyncio; don't let the server's own cap (granian's defaults to 1024
# per worker) stop us before our bulkheads do.
BACKLOG = 16384


def server_argv(
    app: str,
    server: ServerName,
    *,
    host: str,
    port: int,
    workers: int,
    factory: bool = True,
    access_log: bool = False,
    traced: bool = False,
    header_timeout_s: float = 10.0,
) -> list[str]:
    """`traced`: the server's environment sets TENK_OPS_OTEL_ENDPOINT (see `tenk.ops.tracing`).

    `header_timeout_s`: granian's own header read timeout. uvicorn and gunicorn have none; they load
    `tenk.ops.header_timeout`'s protocol, which reads TENK_HEADER_TIMEOUT_S from the server's environment."""
    bin_dir = Path(sys.executable).parent
    if factory:
        app = app_factory(app, traced)
    # Servers log each request at INFO: a quieter level would silence the access log that was asked for.
    log_level = "info" if access_log else "warning"
    if server == "granian":
        argv = [
            str(bin_dir / "granian"),
            "--interface",
            "asgi",
            "--host",
            host,
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--loop",
            "uvloop",
            "--backlog",
            str(BACKLOG),
            "--backpressure",
            str(BACKLOG),
            "--log-level",
            log_level,
            "--workers-kill-timeout",
            "10",
            "--http1-header-read-timeout",
            str(max(1, round(header_timeout_s * 1000))),
        ]
        argv += ["--access-log"] if access_log else ["--no-access-log"]
        return [*argv, *(["--factory"] if factory else []), app]
    if server == "uvicorn":
        argv = [
            str(bin_dir / "uvicorn"),
            app,
            "--host",
            host,
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--loop",
            "uvloop",
            "--http",
            "tenk.ops.header_timeout:HttpToolsWithHeaderTimeout",
            "--backlog",
            str(BACKLOG),
            "--log-level",
            log_level,
            "--timeout-graceful-shutdown",
            "10",
            # Its X-Forwarded-For handling trusts 127.0.0.1 by default; tenk's edge resolves the client
            # itself, from TENK_TRUSTED_PROXIES, as under every server (`tenk.ops.forwarded`).
            "--no-proxy-headers",
        ]
        argv += [] if access_log else ["--no-access-log"]
        return [*argv, *(["--factory"] if factory else [])]
    target = f"{app}()" if factory else app
    argv = [
        str(bin_dir / "gunicorn"),
        target,
        "--worker-class",
        "tenk.ops.header_timeout.UvicornWorkerWithHeaderTimeout",
        "--bind",
        f"{host}:{port}",
        "--workers",
        str(workers),
        "--backlog",
        str(BACKLOG),
        "--log-level",
        log_level,
        "--graceful-timeout",
        "10",
    ]
    return argv + (["--access-logfile", "-"] if access_log else [])


def multiprocess_metrics_dir(data_dir: Path, port: int) -> Path:
    """A fresh directory where several workers' Prometheus counters meet (prometheus_client's multiprocess
    mode); stale files from an earlier run would add old counts."""
    directory = (data_dir / f"metrics-{port}").resolve()
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


def exec_server(argv: list[str]) -> None:
    """Replace this process with the server, so signals reach it directly."""
    os.execv(argv[0], argv)
