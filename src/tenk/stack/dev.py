"""`tenk dev` (what `make run` calls): the embedded stack, the API and its helper processes, until Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tenk.settings import Settings


def _tenk(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "tenk"), *args]


def helper_commands(settings: Settings) -> list[tuple[str, list[str]]]:
    """The processes besides the API that make the whole system run from one command."""
    # One ingest worker drains POST /events into Postgres; a fixed name replays its pending after a crash.
    commands: list[tuple[str, list[str]]] = [("ingest worker", _tenk("worker", "--name", "dev-1"))]
    if "TENK_UPSTREAM_URL" not in os.environ:
        # No real quotes vendor named: a fast mock one where the service looks by default.
        from tenk.upstream.settings import UpstreamSettings

        port = UpstreamSettings().url.port or 9100
        commands.append(
            ("mock-upstream", _tenk("mock-upstream", "--port", str(port), "--p50-ms", "40", "--p99-ms", "400"))
        )
    return commands


def run_dev(settings: Settings) -> int:
    up = subprocess.run(_tenk("up"))
    if up.returncode != 0:
        return up.returncode
    children: list[subprocess.Popen[bytes]] = []
    for _, argv in helper_commands(settings):
        children.append(subprocess.Popen(argv))
    children.append(subprocess.Popen(_tenk("serve")))
    base = f"http://{settings.host}:{settings.port}"
    print(
        f"\ntenk is serving on {base}\n  docs:    {base}/docs\n  ready:   {base}/ready\n"
        f"  metrics: {base}/metrics\n  dev key: {settings.data_dir / 'dev-api-key'}\nCtrl-C stops the API; "
        "`tenk down` stops Postgres and Redis.\n",
        flush=True,
    )
    return wait_then_stop(children)


def wait_then_stop(children: list[subprocess.Popen[bytes]]) -> int:
    try:
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            child.kill()
    return max((child.returncode or 0) for child in children)
