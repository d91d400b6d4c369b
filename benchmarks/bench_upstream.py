"""`make bench-upstream`: tenk's GET /quotes/{symbol} against a sync-handler baseline, behind a fast and a
slow mock vendor, in one run; and the mock's own ceiling, to show it is never the bottleneck.

Each API runs alone on CPU 0 (`taskset -c 0`, one worker, granian for both so that the handlers are
the difference); the mock vendor and wrk share CPU 1. wrk is closed-loop and asks for a fresh symbol
per request, so neither tenk's cache nor its coalescing answers anything: every request is a vendor
call. Both sides get the same 30 s upstream timeout. While wrk runs we sample the API's RSS and CPU
and the number of requests the vendor holds (parked). Several rounds; the tables show medians.

    vendor     connections  what it shows
    40/400 ms  256          CPU-bound regime: requests per second per core
    4 s/22 s   2,000        the inversion: capacity is how many requests you can park
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from benchmarks._common import API_CPU, LOAD_CPU, run_wrk, serve_pinned, stop
from tenk.lab.targets.mock_upstream import MockUpstreamProcess, Profile, start_mock_upstream

UPSTREAM_TIMEOUT_S = "30"
WRK_LOG: list[str] = []

# A fresh symbol per request (<= 12 of [A-Z0-9.]): the thread id keeps wrk threads apart.
UNIQUE_SYMBOLS_LUA = """
local n = 0
local prefix = "B"
setup = function(thread) end
init = function(args) prefix = "B" .. tostring(math.random(10, 99)) end
request = function()
  n = n + 1
  return wrk.format("GET", "/quotes/" .. prefix .. "X" .. tostring(n))
end
"""


@dataclass(frozen=True)
class Target:
    name: str
    app: str
    factory: bool
    env: dict[str, str]


@dataclass(frozen=True)
class Scenario:
    name: str
    profile: Profile
    connections: int
    seconds: int
    warmup_s: int


TARGETS = [
    Target(
        "tenk (async, aiohttp session)",
        "tenk.app:create_app",
        True,
        {
            "TENK_UPSTREAM_TIMEOUT_S": UPSTREAM_TIMEOUT_S,
            "TENK_UPSTREAM_MAX_INFLIGHT": "4096",
        },
    ),
    Target(
        "naive_sync (def handler, httpx.Client per call)",
        "tenk.lab.targets.baselines.naive_sync:app",
        False,
        {"NAIVE_UPSTREAM_TIMEOUT_S": UPSTREAM_TIMEOUT_S, "NAIVE_ACCESS_LOG": "0"},
    ),
]
SCENARIOS = [
    Scenario("vendor p50 40 ms / p99 400 ms", Profile(p50_ms=40, p99_ms=400), 256, 15, 3),
    Scenario("vendor p50 4 s / p99 22 s", Profile(p50_ms=4000, p99_ms=22000), 2000, 40, 0),
]
# Why naive_sync can answer nothing at 2,000 connections: FastAPI runs a sync endpoint's response
# validation in the thread pool too, so a request that got its upstream answer queues again for one of
# the 40 threads, behind every request still waiting for its first.


class Sampler(threading.Thread):
    """Samples the API's RSS and the vendor's parked count until stopped; CPU from cpu_times deltas."""

    def __init__(self, pid: int, mock: MockUpstreamProcess, after_s: float) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.mock = mock
        self.after_s = after_s
        self.rss_mb: list[float] = []
        self.parked: list[int] = []
        self._done = threading.Event()
        self._cpu_start = self._cpu()
        self._wall_start = time.monotonic()

    def _procs(self) -> list[psutil.Process]:
        return [self.root, *self.root.children(recursive=True)]

    def _cpu(self) -> float:
        return sum(p.cpu_times().user + p.cpu_times().system for p in self._procs())

    def run(self) -> None:
        while not self._done.wait(0.5):
            if time.monotonic() - self._wall_start < self.after_s:
                continue
            self.rss_mb.append(sum(p.memory_info().rss for p in self._procs()) / 2**20)
            with contextlib.suppress(httpx.HTTPError):
                self.parked.append(int(self.mock.stats()["in_flight"]))

    def finish(self) -> dict[str, float]:
        cpu_pct = 100 * (self._cpu() - self._cpu_start) / (time.monotonic() - self._wall_start)
        self._done.set()
        self.join()
        return {
            "cpu_pct": cpu_pct,
            "rss_mb": max(self.rss_mb, default=float("nan")),
            "parked": statistics.median(self.parked) if self.parked else float("nan"),
            "parked_max": float(max(self.parked, default=0)),
        }


def start_api(target: Target, mock: MockUpstreamProcess, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "TENK_LOG_LEVEL": "WARNING", "TENK_UPSTREAM_URL": mock.url, **target.env}
    return serve_pinned(target.app, env, log, factory=target.factory)


def wrk(url: str, lua: Path | None, seconds: int, connections: int) -> dict[str, float]:
    # Long enough that wrk itself never gives up before the 30 s upstream timeout does.
    return run_wrk(url, lua, seconds, connections, timeout_s=35, transcript=WRK_LOG)


def run_scenario(scenario: Scenario, target: Target, workdir: Path, lua: Path) -> dict[str, float]:
    with start_mock_upstream(scenario.profile, log=workdir / "mock.log", seed=1, cpus={int(LOAD_CPU)}) as mock:
        process, base = start_api(target, mock, workdir / "api.log")
        try:
            if scenario.warmup_s:
                wrk(base, lua, scenario.warmup_s, scenario.connections)
            # Parked counts only once the closed loop has filled up.
            sampler = Sampler(process.pid, mock, after_s=min(10.0, scenario.seconds / 3))
            sampler.start()
            figures = wrk(base, lua, scenario.seconds, scenario.connections)
            figures.update(sampler.finish())
        finally:
            stop(process)
    return figures


def mock_ceiling(workdir: Path, seconds: int) -> dict[str, float]:
    """The mock alone on CPU 0: zero-delay RPS, and how many 5 s requests it holds at once."""
    figures: dict[str, float] = {}
    with start_mock_upstream(Profile(p50_ms=0, p99_ms=0), log=workdir / "mock-ceiling.log", cpus={0}) as mock:
        wrk(f"{mock.url}/v1/quotes/WARM", None, 2, 64)
        figures["zero_delay_rps"] = wrk(f"{mock.url}/v1/quotes/AAPL", None, seconds, 64)["rps"]
        mock.set_profile(p50_ms=5000, p99_ms=5000)
        mock.reset_stats()
        parked = wrk(f"{mock.url}/v1/quotes/PARK", None, 12, 10_000)
        stats = mock.stats()
        figures["parked_max"] = float(stats["max_in_flight"])
        figures["parked_p99_ms"] = float(stats["latency_ms"]["p99"] or 0.0)
        figures["parked_rps"] = parked["rps"]
        figures["rss_mb"] = psutil.Process(mock.pid).memory_info().rss / 2**20
    return figures


def _fmt(value: float, digits: int = 0) -> str:
    return "n/a" if value != value else f"{value:,.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every duration (e.g. 0.5 for a quick look)")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs two CPUs: the API on one, the load and the vendor on the other")
    workdir = Path(tempfile.mkdtemp(prefix="tenk-bench-upstream-"))
    lua = workdir / "symbols.lua"
    lua.write_text(UNIQUE_SYMBOLS_LUA)

    ceilings: list[dict[str, float]] = []
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    for round_number in range(1, args.rounds + 1):
        ceiling = mock_ceiling(workdir, max(3, int(5 * args.scale)))
        ceilings.append(ceiling)
        print(f"round {round_number} mock ceiling {json.dumps(ceiling)}", file=sys.stderr, flush=True)
        for scenario in SCENARIOS:
            scaled = Scenario(
                scenario.name,
                scenario.profile,
                scenario.connections,
                max(10, int(scenario.seconds * args.scale)),
                scenario.warmup_s,
            )
            for target in TARGETS:
                figures = run_scenario(scaled, target, workdir, lua)
                results.setdefault(scenario.name, {}).setdefault(target.name, []).append(figures)
                print(
                    f"round {round_number} {scenario.name} | {target.name}: {json.dumps(figures)}",
                    file=sys.stderr,
                    flush=True,
                )

    def med(runs: list[dict[str, float]], key: str) -> float:
        values = [r[key] for r in runs if r[key] == r[key]]
        return statistics.median(values) if values else float("nan")

    print(f"\n### mock-upstream alone on one core (CPU 0), wrk on CPU 1, medians of {args.rounds} rounds\n")
    print(
        "| zero-delay RPS (64 conns) | requests held at once (10,000 conns, 5 s delay) "
        "| answer p99 while holding | RSS MB |"
    )
    print("|---:|---:|---:|---:|")
    print(
        f"| {_fmt(med(ceilings, 'zero_delay_rps'))} | {_fmt(med(ceilings, 'parked_max'))} "
        f"| {_fmt(med(ceilings, 'parked_p99_ms'))} ms | {_fmt(med(ceilings, 'rss_mb'))} |"
    )
    print(
        f"\n### GET /quotes/{{symbol}}, one API process on CPU {API_CPU} (granian, 1 worker), vendor + wrk on CPU "
        f"{LOAD_CPU}, a fresh symbol per request, upstream timeout {UPSTREAM_TIMEOUT_S} s, medians of {args.rounds}\n"
    )
    print(
        "| vendor | target | conns | RPS | 2xx RPS | p50 ms | p99 ms | non-2xx | wrk timeouts "
        "| parked (median / max) | API RSS MB | API CPU % |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scenario in SCENARIOS:
        by_target = results[scenario.name]
        for target in TARGETS:
            runs = by_target[target.name]
            print(
                f"| {scenario.name} | {target.name} | {scenario.connections} | {_fmt(med(runs, 'rps'), 1)} "
                f"| {_fmt(med(runs, 'ok_rps'), 1)} | {_fmt(med(runs, 'p50_ms'), 1)} | {_fmt(med(runs, 'p99_ms'), 1)} "
                f"| {_fmt(med(runs, 'non2xx'))} | {_fmt(med(runs, 'timeouts'))} "
                f"| {_fmt(med(runs, 'parked'))} / {_fmt(med(runs, 'parked_max'))} | {_fmt(med(runs, 'rss_mb'))} "
                f"| {_fmt(med(runs, 'cpu_pct'))} |"
            )
        names = [t.name for t in TARGETS]
        fast, slow = med(by_target[names[0]], "ok_rps"), med(by_target[names[1]], "ok_rps")
        ratio = f"{_fmt(fast / slow, 1)}×" if slow else "∞ (sync answered none)"
        print(f"| {scenario.name} | **async / sync, 2xx RPS** | | **{ratio}** | | | | | | | | |")
    (workdir / "wrk.txt").write_text("\n".join(WRK_LOG))
    print(f"\nraw wrk output, server logs: {workdir}")
    if args.json:
        args.json.write_text(json.dumps({"mock": ceilings, "quotes": results}, indent=2))


if __name__ == "__main__":
    main()
