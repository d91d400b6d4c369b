"""`tenk dev` (what `make run` calls): the embedded stack, the API and its helper processes, until Ctrl-C.

The supervisor keeps the whole system up: a child that dies (the ingest worker killed by the OOM killer,
the mock vendor crashing) is logged loudly and started again after a backoff that doubles while it keeps
dying, and the others go on serving. A child that dies again and again right after starting is broken,
not unlucky: after `GIVE_UP_AFTER` quick deaths the supervisor says so and stops everything. Ctrl-C (or
SIGTERM) stops every child and waits for it.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tenk.interrupts import sigterm_as_ctrl_c
from tenk.platform import Backoff
from tenk.settings import Settings

logger = logging.getLogger("tenk.stack.dev")

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 10.0
# A child that ran this long before dying was working: its next restart starts from the first backoff.
STABLE_AFTER_S = 30.0
GIVE_UP_AFTER = 6
POLL_S = 0.2
STOP_TIMEOUT_S = 15.0


def _tenk(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "tenk"), *args]


def helper_commands(settings: Settings) -> list[tuple[str, list[str]]]:
    """The processes besides the API that make the whole system run from one command."""
    # One ingest worker drains POST /events into Postgres; a fixed name replays its pending after a crash.
    commands: list[tuple[str, list[str]]] = [("ingest worker", _tenk("worker", "--name", "dev-1"))]
    mock = settings.upstream.mock
    if mock is None:
        mock = "url" not in settings.upstream.model_fields_set
    if mock:
        # No real quotes vendor named (or a mock asked for): a fast mock one where the service looks.
        port = settings.upstream.url.port or 9100
        commands.append(
            ("mock-upstream", _tenk("mock-upstream", "--port", str(port), "--p50-ms", "40", "--p99-ms", "400"))
        )
    return commands


def _describe_exit(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float = 0.0
    backoff: Backoff = field(default_factory=lambda: Backoff(BACKOFF_FIRST_S, BACKOFF_MAX_S))
    quick_deaths: int = 0

    def start(self, now: float) -> None:
        self.process = subprocess.Popen(self.argv)
        self.started_at = now
        logger.info("%s started (pid %d)", self.name, self.process.pid)


class GaveUpError(RuntimeError):
    """A child kept dying right after it started."""


@dataclass
class Supervisor:
    children: list[Child]
    backoff_first_s: float = BACKOFF_FIRST_S
    backoff_max_s: float = BACKOFF_MAX_S
    stable_after_s: float = STABLE_AFTER_S
    give_up_after: int = GIVE_UP_AFTER

    def start(self) -> None:
        now = time.monotonic()
        for child in self.children:
            child.backoff = Backoff(self.backoff_first_s, self.backoff_max_s)
            child.start(now)

    def check(self) -> None:
        """Notice deaths and restart what is due; raises GaveUpError for a child that cannot stay up."""
        now = time.monotonic()
        for child in self.children:
            if child.process is None:
                if now >= child.restart_at:
                    child.start(now)
                continue
            code = child.process.poll()
            if code is None:
                continue
            lived = now - child.started_at
            if lived >= self.stable_after_s:
                child.backoff.reset()
                child.quick_deaths = 0
            child.quick_deaths += 1
            if child.quick_deaths >= self.give_up_after:
                raise GaveUpError(
                    f"{child.name} {_describe_exit(code)} {child.quick_deaths} times in a row, each time within "
                    f"{self.stable_after_s:.0f}s of starting; giving up (see its output above)"
                )
            delay = child.backoff.next_delay()
            logger.error(
                "%s (pid %d) %s after %.1fs; restarting it in %.1fs (the rest keeps running)",
                child.name,
                child.process.pid,
                _describe_exit(code),
                lived,
                delay,
            )
            child.process = None
            child.restart_at = now + delay

    def stop(self) -> None:
        running = [c.process for c in self.children if c.process is not None and c.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        for process in running:
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def supervise(supervisor: Supervisor) -> int:
    """Run until Ctrl-C or SIGTERM (exit 0) or until a child cannot stay up (exit 1)."""
    # Ctrl-C is KeyboardInterrupt even when started with SIGINT ignored: the `tenk` entry point sees to that.
    previous_sigint = signal.getsignal(signal.SIGINT)
    code = 0
    with sigterm_as_ctrl_c():
        try:
            supervisor.start()
            while True:
                supervisor.check()
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            logger.info("stopping: %s", ", ".join(child.name for child in supervisor.children))
        except GaveUpError as exc:
            logger.error("%s", exc)
            code = 1
        finally:
            # A second Ctrl-C while the children stop must not leave them orphaned.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            supervisor.stop()
            signal.signal(signal.SIGINT, previous_sigint)
    return code


def run_dev(settings: Settings, products: int, tasks: int) -> int:
    from tenk.ops.logging import configure_logging

    configure_logging(settings.log_level)
    up = subprocess.run(_tenk("up", "--products", str(products), "--tasks", str(tasks)))
    if up.returncode != 0:
        return up.returncode
    children = [Child(name, argv) for name, argv in helper_commands(settings)]
    children.append(Child("api", _tenk("serve")))
    base = f"http://{settings.host}:{settings.port}"
    print(
        f"\ntenk is serving on {base}\n  docs:    {base}/docs\n  ready:   {base}/ready\n"
        f"  metrics: {base}/metrics\n  dev key: {settings.data_dir / 'dev-api-key'}\nCtrl-C stops the API; "
        "`tenk down` stops Postgres and Redis.\n",
        flush=True,
    )
    return supervise(Supervisor(children))
