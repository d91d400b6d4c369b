"""`tenk dev` (what `make run` calls): the embedded stack, the API and its helper processes, until Ctrl-C."""

from __future__ import annotations

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
    return []


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
