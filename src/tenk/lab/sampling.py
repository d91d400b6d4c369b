"""Server-side figures: CPU and RSS of the target's process tree each second, and /metrics scrapes."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import psutil

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+([-+0-9.eEinfaINF]+)")


@dataclass
class ServerStats:
    cpu_cores_mean: float = 0.0  # CPU seconds per second, summed over the tree: 1.0 = one core busy
    cpu_cores_max: float = 0.0
    rss_mb_max: float = 0.0
    rss_mb_last: float = 0.0
    processes: int = 0
    # Busy cores on the target's CPU set that were not the target: other tenants of those cores.
    neighbour_cores_mean: float = 0.0
    series: list[dict[str, float]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class TreeSampler:
    """Samples a process and all its descendants once a second, in a thread, until `stop`.

    Processes that appear mid-run (a server re-spawning a worker) count from their first sample.
    """

    def __init__(self, pid: int, cpus: set[int] | None = None, interval_s: float = 1.0) -> None:
        self.pid = pid
        self.cpus = sorted(cpus) if cpus else []
        self._busy = 0.0
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._cpu: dict[int, float] = {}
        self._started = 0.0
        self.stats = ServerStats()

    def __enter__(self) -> TreeSampler:
        self._started = time.monotonic()
        self._sample(baseline=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        series = self.stats.series
        if series:
            cpu = [point["cpu_cores"] for point in series]
            self.stats.cpu_cores_mean = round(sum(cpu) / len(cpu), 3)
            self.stats.cpu_cores_max = round(max(cpu), 3)
            self.stats.rss_mb_max = round(max(point["rss_mb"] for point in series), 1)
            self.stats.rss_mb_last = series[-1]["rss_mb"]
            self.stats.neighbour_cores_mean = round(sum(p["neighbour_cores"] for p in series) / len(series), 3)

    def _tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def _busy_seconds(self) -> float:
        if not self.cpus:
            return 0.0
        per_cpu = psutil.cpu_times(percpu=True)
        busy = 0.0
        for cpu in self.cpus:
            if cpu < len(per_cpu):
                times = per_cpu[cpu]
                busy += sum(times) - times.idle - getattr(times, "iowait", 0.0)
        return busy

    def _sample(self, baseline: bool = False) -> None:
        now = time.monotonic()
        busy = self._busy_seconds()
        busy_delta, self._busy = busy - self._busy, busy
        cpu_delta = 0.0
        rss = 0
        seen: dict[int, float] = {}
        for proc in self._tree():
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    total = times.user + times.system
                    rss += proc.memory_info().rss
            except psutil.Error:
                continue
            seen[proc.pid] = total
            cpu_delta += total - self._cpu.get(proc.pid, total if baseline else 0.0)
        self._cpu.update(seen)
        self.stats.processes = max(self.stats.processes, len(seen))
        if baseline:
            self._last = now
            return
        elapsed = now - self._last
        self._last = now
        if elapsed < 0.2:
            return
        target_cores = cpu_delta / elapsed
        neighbours = max(0.0, busy_delta / elapsed - target_cores) if self.cpus else 0.0
        self.stats.series.append(
            {
                "t_s": round(now - self._started, 2),
                "cpu_cores": round(target_cores, 3),
                "rss_mb": round(rss / 2**20, 1),
                "neighbour_cores": round(neighbours, 3),
            }
        )

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()


def scrape_metrics(base_url: str) -> dict[str, float]:
    """Every sample of a Prometheus text page, by `name{labels}`; empty if the target has no /metrics."""
    try:
        response = httpx.get(base_url + "/metrics", timeout=5.0)
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    samples: dict[str, float] = {}
    for line in response.text.splitlines():
        if line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match:
            try:
                samples[match.group(1)] = float(match.group(2))
            except ValueError:
                continue
    return samples


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What the counters gained over the run (totals, histogram counts and sums), keyed as scraped."""
    counters = ("_total", "_count", "_sum")
    delta = {}
    for key, value in after.items():
        name = key.split("{", 1)[0]
        if name.endswith(counters) and value != before.get(key, 0.0):
            delta[key] = round(value - before.get(key, 0.0), 6)
    return delta
