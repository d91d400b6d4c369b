"""Running the load generator as a child process and measuring what it cost.

The generator's CPU is taken from the kernel's rusage of the finished child (exact, children
included), divided by its wall time and the cores it may use. A generator near its cores' limit
delays requests and under-reports latency, so such a run is flagged and never reported as a
server figure.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from tenk.lab.cpus import cpu_count_of

GENERATOR_BOUND_UTIL = 0.80


@dataclass
class GeneratorCost:
    cpu_s: float
    wall_s: float
    cores: int
    peak_rss_mb: float

    @property
    def util(self) -> float:
        """Share of the generator's cores it used: 1.0 means every core was busy the whole run."""
        return self.cpu_s / (self.wall_s * self.cores) if self.wall_s > 0 and self.cores > 0 else 0.0

    @property
    def cores_used(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


def generator_verdict(cost: GeneratorCost, dropped: int) -> list[str]:
    """Why a run is generator-bound; empty when its figures may be credited to the server."""
    reasons = []
    if cost.util > GENERATOR_BOUND_UTIL:
        reasons.append(f"generator used {cost.util:.0%} of its {cost.cores} core(s) (limit {GENERATOR_BOUND_UTIL:.0%})")
    if dropped > 0:
        # k6 drops an arrival when no VU is free to start it on time: the schedule was not kept,
        # so the offered load was not the load asked for.
        reasons.append(f"{dropped} iterations dropped: k6 could not start them on schedule (VUs or CPU exhausted)")
    return reasons


def pinned(argv: list[str], cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus, *argv] if cpus else argv


def run_measured(
    argv: list[str],
    *,
    cpus: str | None,
    env: dict[str, str],
    log: Path,
    timeout_s: float,
    on_tick: Callable[[float], None] | None = None,
    cwd: Path | None = None,
) -> tuple[int, GeneratorCost]:
    """Run a generator to completion, its output appended to `log`; return its exit code and cost."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    peak_rss = 0.0
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        process = subprocess.Popen(
            pinned(argv, cpus), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd
        )
    done = threading.Event()

    def watch() -> None:
        nonlocal peak_rss
        try:
            proc = psutil.Process(process.pid)
            while not done.wait(0.5):
                peak_rss = max(peak_rss, proc.memory_info().rss / 2**20)
                if on_tick is not None:
                    on_tick(time.monotonic() - started)
        except psutil.Error:
            pass

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        rusage = _wait(process, timeout_s)
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        done.set()
        watcher.join()
    wall = time.monotonic() - started
    cpu = rusage.ru_utime + rusage.ru_stime
    return process.returncode, GeneratorCost(cpu, wall, cpu_count_of(cpus), round(peak_rss, 1))


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> resource.struct_rusage:
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, rusage = os.wait4(process.pid, os.WNOHANG)
        if pid == process.pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return rusage
        if time.monotonic() > deadline:
            process.kill()
            _, status, rusage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            return rusage
        time.sleep(0.05)
