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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from tenk.lab.cpus import cpu_count_of, pinned
from tenk.lab.definition.mixes import Mix
from tenk.lab.documents import LoadFigures

GENERATOR_BOUND_UTIL = 0.80
# What a generator keeps of the environment the lab runs in: its runtime's and its own settings, where to
# find certificates and proxies, and the locale. The script reads only the TENK_LAB_* variables the lab
# sets for it; the caller's database URLs, cloud credentials and other secrets stay out of its reach
# (k6's `__ENV` and wrk's `os.getenv` see the whole environment of their process).
GENERATOR_ENV = frozenset(
    {
        "PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL",
        "SSL_CERT_FILE", "SSL_CERT_DIR",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
        "GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS", "GOTRACEBACK",
    }
)  # fmt: skip
# k6 reads its options from K6_* variables (K6_CSV_SAVE_INTERVAL, K6_NO_USAGE_REPORT, ...).
GENERATOR_ENV_PREFIXES = ("K6_",)


@dataclass(frozen=True)
class LoadRun:
    """One go of a load generator at a target, handed to k6 (`run_k6`) and to wrk (`run_wrk`) alike: the mix,
    how hard (an arrival rate for k6's open loop, a number of connections for wrk's closed one) and how long,
    where to and with which key, and where the run's files go, its output is logged and it may run."""

    mix: Mix
    duration_s: float
    base_url: str
    api_key: str
    # Makes the mix's `{uid}` unique across runs and generator machines.
    run_id: str
    workdir: Path
    log: Path
    cpus: str | None
    rate: float = 0.0  # k6: total arrivals a second, split by the mix's weights
    connections: int = 0  # wrk
    slo_ms: float = 100.0  # k6 sizes each endpoint's VU pool to its worst latency, or this if larger
    segment: str = ""  # k6: the i-th of n execution segments ("i/n"), for several generator machines
    on_tick: Callable[[float], None] | None = None  # called with the seconds since the start, about twice a second


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


def charge(figures: LoadFigures, cost: GeneratorCost) -> None:
    """Write what the generator cost into its run's figures, and whether that makes the run generator-bound."""
    figures.generator_cpu_s = round(cost.cpu_s, 3)
    figures.generator_cores_used = round(cost.cores_used, 3)
    figures.generator_util = round(cost.util, 3)
    figures.generator_cores = cost.cores
    figures.generator_peak_rss_mb = round(cost.peak_rss_mb, 1)
    figures.generator_reasons = generator_verdict(cost, figures.dropped)
    figures.generator_bound = bool(figures.generator_reasons)


def generator_environment(base: Mapping[str, str], **lab: str) -> dict[str, str]:
    """What a load generator is started with: the part of `base` it keeps (GENERATOR_ENV), then the lab's
    own variables for its script."""
    kept = {
        name: value for name, value in base.items() if name in GENERATOR_ENV or name.startswith(GENERATOR_ENV_PREFIXES)
    }
    return {**kept, **lab}


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
