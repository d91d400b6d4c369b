"""Server-side figures, each second: CPU and RSS of the target's process tree, the CPU of every other
process the lab knows (generator, dependencies), each core's busy share; and /metrics scrapes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from tenk.lab.documents import GENERATORS, GaugeFigures, ServerSample

Known = Callable[[], dict[str, int]]


def _generator_children() -> dict[str, int]:
    """The lab's own children that nobody named: the load generator (k6 or wrk) of this step."""
    found = {}
    for child in psutil.Process().children():
        try:
            name = child.name()
        except psutil.Error:
            continue
        if name in GENERATORS:
            found[name] = child.pid
    return found


class TreeSampler:
    """Samples a process and all its descendants once a second, in a thread, until `stop`; beside
    it, every process tree `known()` names (by role) and the lab's own generator child, and the busy
    share of every core, so that a ceiling can be pinned on whoever had no CPU left.

    Processes that appear mid-run (a server re-spawning a worker) count from their first sample, and
    those that exit between samples through the parent that reaps them (`_seconds`).
    With `nodes` (name -> pid: the API nodes of a cluster), the target is all their trees together,
    and each node's share is kept apart as well.
    """

    def __init__(
        self,
        pid: int,
        cpus: set[int] | None = None,
        interval_s: float = 1.0,
        known: Known | None = None,
        nodes: dict[str, int] | None = None,
    ) -> None:
        self.pid = pid
        self.nodes = nodes or {}
        self._node_sums: dict[str, float] = {}
        self.cpus = sorted(cpus) if cpus else []
        self.known = known or dict
        self._busy = 0.0
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._cpu: dict[str, float] = {}  # each node's tree's CPU seconds at the last sample
        self._role_cpu: dict[str, float] = {}
        self._core_busy: list[float] = []
        self._role_sums: dict[str, float] = {}
        self._core_sums: list[float] = []
        self._role_samples = 0
        self._started = 0.0
        self.stats = ServerSample(target_cpus=list(self.cpus))

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
            self.stats.cpu_cores_mean = round(sum(cpu) / len(cpu), 5)
            self.stats.cpu_cores_max = round(max(cpu), 3)
            self.stats.rss_mb_max = round(max(point["rss_mb"] for point in series), 1)
            self.stats.rss_mb_last = series[-1]["rss_mb"]
            self.stats.neighbour_cores_mean = round(sum(p["neighbour_cores"] for p in series) / len(series), 3)
        if self._role_samples:
            n = self._role_samples
            self.stats.roles_cores_mean = {role: round(total / n, 5) for role, total in self._role_sums.items()}
            self.stats.core_busy_mean = {str(cpu): round(total / n, 3) for cpu, total in enumerate(self._core_sums)}
            self.stats.node_cores_mean = {node: round(total / n, 5) for node, total in self._node_sums.items()}

    def _trees(self) -> dict[str, list[psutil.Process]]:
        roots = self.nodes or {"target": self.pid}
        return {node: _tree(pid) for node, pid in roots.items()}

    def _busy_seconds(self) -> float:
        if not self.cpus:
            return 0.0
        per_cpu = psutil.cpu_times(percpu=True)
        busy = 0.0
        for cpu in self.cpus:
            if cpu < len(per_cpu):
                busy += _busy(per_cpu[cpu])
        return busy

    def _roles(self, baseline: bool) -> dict[str, float]:
        """Each known role's CPU seconds gained since the last sample (its whole process tree)."""
        roles = {**self.known(), **_generator_children()}
        gained: dict[str, float] = {}
        for role, root in roles.items():
            tree = _tree(root)
            if tree and role not in self.stats.role_cpus:
                try:
                    self.stats.role_cpus[role] = sorted(tree[0].cpu_affinity() or [])
                except psutil.Error:
                    self.stats.role_cpus[role] = []
            total = _tree_seconds(tree)
            # A role first seen after the baseline counts from zero: its whole life is in this window.
            gained[role] = max(0.0, total - self._role_cpu.get(role, total if baseline else 0.0))
            self._role_cpu[role] = total
        return gained

    def _sample(self, baseline: bool = False) -> None:
        now = time.monotonic()
        busy = self._busy_seconds()
        busy_delta, self._busy = busy - self._busy, busy
        per_core = [_busy(times) for times in psutil.cpu_times(percpu=True)]
        core_delta = [b - (self._core_busy[i] if i < len(self._core_busy) else b) for i, b in enumerate(per_core)]
        self._core_busy = per_core
        roles = self._roles(baseline)
        rss = 0
        processes = 0
        node_delta: dict[str, float] = {}
        for node, tree in self._trees().items():
            total = 0.0
            for proc in tree:
                try:
                    with proc.oneshot():
                        total += _seconds(proc.cpu_times())
                        rss += proc.memory_info().rss
                except psutil.Error:
                    continue
                processes += 1
            node_delta[node] = max(0.0, total - self._cpu.get(node, total if baseline else 0.0))
            self._cpu[node] = total
        cpu_delta = sum(node_delta.values())
        self.stats.processes = max(self.stats.processes, processes)
        if baseline:
            self._last = now
            return
        elapsed = now - self._last
        self._last = now
        if elapsed < 0.2:
            return
        target_cores = cpu_delta / elapsed
        neighbours = max(0.0, busy_delta / elapsed - target_cores) if self.cpus else 0.0
        self._role_samples += 1
        for role, gained in roles.items():
            self._role_sums[role] = self._role_sums.get(role, 0.0) + gained / elapsed
        for node, gained in node_delta.items() if self.nodes else ():
            self._node_sums[node] = self._node_sums.get(node, 0.0) + gained / elapsed
        if len(self._core_sums) < len(core_delta):
            self._core_sums += [0.0] * (len(core_delta) - len(self._core_sums))
        for cpu, delta in enumerate(core_delta):
            self._core_sums[cpu] += min(1.0, max(0.0, delta / elapsed))
        self.stats.series.append(
            {
                "t_s": round(now - self._started, 2),
                "cpu_cores": round(target_cores, 4),
                "rss_mb": round(rss / 2**20, 1),
                "neighbour_cores": round(neighbours, 3),
            }
        )

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()


def _busy(times: Any) -> float:
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


def _seconds(times: Any) -> float:
    """A process's CPU seconds: its own, and those of the children it has reaped. A child that lives
    between two samples (the Postgres backend of a connection opened per request) is never seen alive;
    its CPU shows up in its parent's reaped children's time. Summed over a tree this way, an exiting
    child's CPU moves to its parent instead of vanishing."""
    return float(times.user + times.system + times.children_user + times.children_system)


def _tree_seconds(tree: list[psutil.Process]) -> float:
    total = 0.0
    for proc in tree:
        try:
            total += _seconds(proc.cpu_times())
        except psutil.Error:
            continue
    return total


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


# A target using less than this share of the cores it may use has worked off what an overload queued: a
# queue keeps it at its whole budget, and its idle work (samplers, keep-alives: tens of millicores) must
# not count as a queue, or a small budget would wait out the timeout after every failed step.
IDLE_SHARE = 0.5
IDLE_WINDOW_S = 0.5


def wait_until_idle(pids: Callable[[], list[int]], cores: float, timeout_s: float) -> float:
    """Wait until the process trees of `pids()` use under IDLE_SHARE of `cores` over a window, or
    `timeout_s` passes; returns the seconds waited. An overloaded step leaves the target a queue that it
    keeps serving after the generator stops: under a budget of 300m, 800 queued requests of 30 ms each
    are 80 s of work, and a next step started before that inherits them and fails whatever its rate."""
    started = time.monotonic()
    while True:
        before = _tree_cpu_seconds(pids())
        time.sleep(IDLE_WINDOW_S)  # the window CPU is measured over, not a wait for an event
        busy = (_tree_cpu_seconds(pids()) - before) / IDLE_WINDOW_S
        waited = time.monotonic() - started
        if busy < IDLE_SHARE * cores or waited >= timeout_s:
            return waited


def _tree_cpu_seconds(pids: list[int]) -> float:
    return sum(_tree_seconds(_tree(pid)) for pid in pids)


def listener_pid(port: int) -> int | None:
    """The process listening on a local TCP port (a Postgres or Redis the lab did not start), if visible."""
    try:
        connections = psutil.net_connections("tcp")
    except psutil.Error:
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            return int(conn.pid)
    return None


def socket_holder_pid(path: str) -> int | None:
    """The process serving a Unix socket, if visible: of those holding it (the server, Postgres's backends,
    a forked child), the one whose parent does not."""
    try:
        # For a Unix socket psutil gives the path as `laddr`, a str, though it is typed as an address.
        holders = {int(c.pid) for c in psutil.net_connections("unix") if str(c.laddr) == path and c.pid}
    except psutil.Error:
        return None
    for pid in sorted(holders):
        try:
            if psutil.Process(pid).ppid() not in holders:
                return pid
        except psutil.Error:
            continue
    return None


def server_pid(url: str) -> int | None:
    """The process serving a Postgres or Redis URL on this machine, if visible: whoever listens on its
    local TCP port, or holds its Unix socket (a `unix://` path, or the directory in Postgres's `host=`)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return socket_holder_pid(unquote(parts.path))
    query = parse_qs(parts.query)
    host = parts.hostname or query.get("host", [""])[-1]
    port = parts.port or int(query.get("port", ["0"])[-1] or 0)
    if host.startswith("/"):
        return socket_holder_pid(f"{host.rstrip('/')}/.s.PGSQL.{port or 5432}")
    if host in ("127.0.0.1", "localhost", "::1") and port:
        return listener_pid(port)
    return None


def scrape_metrics(base_url: str) -> dict[str, float]:
    """Every sample of a Prometheus text page, by `name{labels}`; empty if the target has no /metrics
    or serves something that is not the Prometheus text format."""
    try:
        response = httpx.get(base_url + "/metrics", timeout=5.0)
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    return parse_metrics(response.text)


def parse_metrics(text: str) -> dict[str, float]:
    samples: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    except ValueError:
        return {}
    return samples


def metrics_gauges(after: dict[str, float]) -> dict[str, float]:
    """The gauges at the end of the run (in-flight, pool sizes...): what counters' deltas leave out."""
    skip = ("_total", "_count", "_sum", "_bucket", "_created")
    return {key: value for key, value in after.items() if not key.split("{", 1)[0].endswith(skip)}


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What the counters gained over the run (totals, histogram counts and sums), keyed as scraped."""
    counters = ("_total", "_count", "_sum")
    delta = {}
    for key, value in after.items():
        name = key.split("{", 1)[0]
        if name.endswith(counters) and value != before.get(key, 0.0):
            delta[key] = round(value - before.get(key, 0.0), 6)
    return delta


class GaugeWatcher:
    """Scrapes a target's /metrics once a second during a step and keeps each gauge's last value and
    its maximum: a gauge read only at the end (requests in flight, parked calls) says nothing of its
    peak. Counters are left to `metrics_delta`. One scrape a second costs the target a little CPU,
    so the runner watches only where a gauge is the point (slow upstreams, ingest)."""

    def __init__(self, base_url: str, interval_s: float = 1.0) -> None:
        self.base_url = base_url
        self.interval_s = interval_s
        self.last: dict[str, float] = {}
        self.max: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GaugeWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._scrape()

    def _scrape(self) -> None:
        for key, value in metrics_gauges(scrape_metrics(self.base_url)).items():
            self.last[key] = value
            self.max[key] = max(value, self.max.get(key, value))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._scrape()
            self._stop.wait(self.interval_s)

    def to_json(self) -> dict[str, GaugeFigures]:
        return {key: {"last": value, "max": self.max[key]} for key, value in sorted(self.last.items())}
