"""One repeat of one rung, in named steps: start what it needs, measure each step of load, judge the step,
and make the rung's result. `run_rung` is the whole of it; `tenk lab run` calls it once per rung and repeat.

A step is one go of the load generator at one rate: the warm-up, the fixed-rate run, or one of a capacity
search's steps. Every step is measured the same way (the servers sampled while it runs, the vendor's and
the ingest backlog's figures read at both ends), so the search and the run cannot disagree on what
"passed" means.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from tenk.lab.cpus import cpu_set, other_cpus, pin_tree, staying_on
from tenk.lab.definition.ladder import Rung
from tenk.lab.definition.mixes import Mix
from tenk.lab.documents import BudgetRecord, CapacityResult, LoadFigures, RungProfile, RungResult, ServerSample
from tenk.lab.driving.generator import LoadRun
from tenk.lab.driving.k6 import run_k6
from tenk.lab.driving.summary import GeneratorSummary
from tenk.lab.driving.wrk import run_wrk
from tenk.lab.measuring.capacity import SearchPlan, search, step_failures
from tenk.lab.measuring.dependency_probe import DependencyProbe
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.outcome import rung_result, target_cores
from tenk.lab.measuring.profiling import StackSampler
from tenk.lab.measuring.sampling import GaugeWatcher, TreeSampler, scrape_metrics, wait_until_idle
from tenk.lab.measuring.state import (
    INGEST_DRAINED,
    REDIS_FLUSHED,
    REDIS_PRIVATE,
    TARGET_RESET,
    UPSTREAM_RESET,
    backlog_failures,
    db_now,
    drain_ingest,
    flush_redis,
    ingest_figures,
    ingest_snapshot,
    landed,
    reset_upstream,
    upstream_snapshot,
)
from tenk.lab.processes.cluster import start_nodes
from tenk.lab.processes.cpubudget import CGROUP_ROOT, PERIOD_US, CpuBudget, NoBudget, budget_millicores, open_budget
from tenk.lab.processes.servers import (
    ProcessSet,
    process_set,
    start_redis,
    start_target,
    start_upstream,
    start_workers,
)

# After a step whose backlog grew, the workers get this long to land it before the next step.
STEP_DRAIN_TIMEOUT_S = 10.0
# How long a target may take to work off an overload's queue before the next step starts regardless.
IDLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Bench:
    """What every rung of one ladder run shares: its environment (the stack's URLs included), the API key,
    the run's folder and options, the stack's processes by role, and whether the lab owns Redis."""

    env: Mapping[str, str]
    api_key: str
    out: Path
    options: RunOptions
    dependencies: Mapping[str, int]
    owns_redis: bool
    topology: str = "single"
    cpu_period_us: int = PERIOD_US
    # Where the cgroup hierarchy is mounted (TENK_LAB_CGROUP_ROOT: a container may mount it elsewhere).
    cgroup_root: Path = CGROUP_ROOT
    # How `cpu_budget = "auto"` chose this run's budget (its figures), or "".
    auto_note: str = ""
    # Why `auto` found no quota to set ("auto: no CPU budget: ..."): every verdict is labelled with it.
    budget_missing: str = ""
    # What the rungs' database is and where it came from (`StackInfo.data`), said with the other resets.
    data: str = ""
    # What `auto`'s calibration expects each rung (by index) to serve at its budget: where its search starts.
    estimates: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Measured:
    """One step's figures: the generator's, the servers', and the generator's own summary."""

    figures: LoadFigures
    server: ServerSample
    summary: GeneratorSummary | None


def run_rung(rung: Rung, mix: Mix, bench: Bench, repeat: int = 0) -> RungResult:
    run = RungRun(rung, mix, bench, repeat)
    try:
        with staying_on(run.helper_cpus), process_set(run.dir / "logs") as processes:
            run.start(processes)
            measured, capacity = run.measure_rung()
            run.finish()
    finally:
        run.close()
    return run.result(measured, capacity)


class RungRun:
    """One repeat of one rung: `start`, then `measure` steps (each judged by `judge`), then `result`."""

    def __init__(self, rung: Rung, mix: Mix, bench: Bench, repeat: int, folder: str = "") -> None:
        self.rung, self.config, self.mix, self.bench, self.repeat = rung, rung.config, mix, bench, repeat
        self.options = bench.options
        self.progress = bench.options.progress
        self.helper_cpus = other_cpus(self.config.cpus)
        self.dir = bench.out / (folder or f"rung-{rung.index + 1:02d}/repeat-{repeat + 1}")
        # The target's CPU quota: opened by `start`, removed by `close`.
        self.budget_m = budget_millicores("cpu_budget", self.config.cpu_budget)
        self.budget: CpuBudget | NoBudget | None = None
        self.log = self.dir / "generator.log"
        self.run_id = f"{bench.out.name}-r{rung.index + 1}-{repeat + 1}"
        self.local = bench.options.base_url is None
        self.started_at = time.monotonic()
        # Filled by `start`: where the load goes, and who serves it.
        self.env: dict[str, str] = {}
        self.base_url = (bench.options.base_url or "").rstrip("/")
        self.processes: ProcessSet | None = None
        self.target_pid: int | None = None
        self.nodes: dict[str, int] = {}
        # The mock vendor's admin token, for zeroing its counts before each step.
        self.upstream_token = ""
        self.reset: list[str] = []
        self.metrics_before: dict[str, float] = {}
        self.metrics_after: dict[str, float] = {}
        # `--profile`: each measured step's stack file (relative to the run's folder), or why there is none.
        self.stacks: list[str] = []
        self.stacks_missing = ""
        self.sampler_cpu_s = self.sampled_s = 0.0

    # What this rung watches, decided by its config and what `start` started.
    @property
    def scrape(self) -> bool:
        """Scrape /metrics before and after. Behind HAProxy, /metrics is one node's, a different one each
        time: not the target's figures."""
        return self.config.is_tenk and self.local and not self.nodes

    @property
    def dsn(self) -> str:
        """Rows landed and their lag come from Postgres, for every target that ingests."""
        return self.env.get("TENK_DATABASE_URL", "") if self.local and self.mix.needs_ingest else ""

    @property
    def watch_backlog(self) -> bool:
        """The backlog comes from tenk's stats."""
        return bool(self.dsn) and self.config.is_tenk

    @property
    def backlog_stable(self) -> bool:
        """Whether a step must show its backlog did not grow: only where one is kept. The direct-INSERT
        baseline lands each event before it answers, so what it accepted has landed by construction; asked
        for a backlog it has none of, every step failed ("backlog unknown") and its capacity read 0."""
        return self.config.pass_if_backlog_stable and self.watch_backlog

    @property
    def watch_gauges(self) -> bool:
        """Gauges are polled each second only where their peak is the point: parked upstream calls, backlog."""
        return self.scrape and (self.mix.needs_upstream or self.mix.needs_ingest)

    @property
    def quota(self) -> CpuBudget | None:
        return self.budget if isinstance(self.budget, CpuBudget) else None

    @property
    def dependency_cpus(self) -> str | None:
        """Under a quota the target and its dependencies share the target's cores and the generator has
        the rest to itself; without one, as before: the dependencies beside the generator."""
        return self.config.cpus if self.quota is not None else self.helper_cpus

    def open_budget(self) -> None:
        """The quota for this rung's target, and its dependencies moved onto the target's cores."""
        if not self.local or self.budget_m is None:
            return
        if self.bench.topology == "cluster":
            self.budget = NoBudget("a cluster's API nodes are not budgeted (one quota per node is not built)")
        else:
            self.budget = open_budget(self.budget_m, self.bench.cgroup_root, self.bench.cpu_period_us)
        if isinstance(self.budget, NoBudget):
            self.progress.note(f"cpu_budget {self.budget_m}m asked: {self.budget.label}")
            return
        for pid in self.bench.dependencies.values():
            pin_tree(pid, cpu_set(self.config.cpus))

    def close(self) -> None:
        """Remove the quota's group; `process_set` has stopped its processes."""
        if self.quota is not None:
            self.quota.remove()

    def start(self, processes: ProcessSet) -> None:
        """Reset what the rung shares with others, start what it needs (its own Redis, the mock vendor,
        ingest workers, the target or the API nodes), and read the target's metrics before any load."""
        config, env = self.config, {**self.bench.env, **self.config.env}
        self.processes = processes
        self.open_budget()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
        if self.local and config.redis_io_threads:
            env["TENK_REDIS_URL"] = start_redis(processes, config.redis_io_threads, self.dependency_cpus, env)
            self.reset.append(f"{REDIS_PRIVATE}, io-threads {config.redis_io_threads}")
        elif self.local and self.bench.owns_redis and env.get("TENK_REDIS_URL"):
            flush_redis(env["TENK_REDIS_URL"])
            self.reset.append(REDIS_FLUSHED)
        if self.local:
            if self.bench.data:
                self.reset.append(self.bench.data)
            self.reset.append(TARGET_RESET)
            if self.mix.needs_upstream:
                self.reset.append(UPSTREAM_RESET)
                env["TENK_UPSTREAM_URL"], self.upstream_token = start_upstream(
                    processes, config, self.dependency_cpus, env
                )
            if config.ingest_workers:
                start_workers(processes, config.ingest_workers, self.dependency_cpus, env)
            if self.bench.topology == "cluster":
                self.nodes, self.base_url = start_nodes(processes, config, env, self.helper_cpus)
                self.target_pid = next(iter(self.nodes.values()))
            else:
                target, self.base_url = start_target(processes, config, env, self.quota)
                self.target_pid = target.pid
        self.env = env
        self.metrics_before = scrape_metrics(self.base_url) if self.scrape else {}

    def measure(self, phase: str, rate: float, number: int, duration_s: float) -> Measured:
        """Drive one step of load (k6 at `rate`, or wrk closed-loop) while sampling the servers."""
        config, progress, base_url, api_key = self.config, self.progress, self.base_url, self.bench.api_key
        step_dir = self.dir / f"{phase}-{number:02d}"

        def tick(elapsed: float) -> None:
            progress.step(phase, number, rate, elapsed, duration_s)

        sampler = self._sampler()
        stacks = self._stack_sampler(phase, step_dir)
        # Only for apps known to reach nothing but the stack: another app may wait on what the lab cannot see.
        probe = DependencyProbe(self.env) if self.local and self.config.is_ours else None
        upstream_url = self.env.get("TENK_UPSTREAM_URL", "") if self.local else ""
        if upstream_url:
            reset_upstream(upstream_url, self.upstream_token)
        ingest_start = ingest_snapshot(base_url, api_key) if self.watch_backlog else {}
        window_start = db_now(self.dsn) if self.dsn else None
        gauges = GaugeWatcher(base_url) if self.watch_gauges else None
        throttled_before = self.quota.throttling() if self.quota is not None else None
        load = LoadRun(
            self.mix, duration_s, base_url, api_key,
            # wrk's run has the rung repeat's id; each k6 step one of its own
            run_id=self.run_id if config.engine == "wrk" else f"{self.run_id}-{phase}{number}",
            workdir=step_dir, log=self.log, cpus=self.helper_cpus, rate=rate, connections=config.connections,
            slo_ms=config.slo_p99_ms, segment=self.options.segment, on_tick=tick,
        )  # fmt: skip
        summary: GeneratorSummary
        with (
            sampler if sampler is not None else nullcontext(),
            gauges if gauges is not None else nullcontext(),
            probe if probe is not None else nullcontext(),
            stacks if stacks is not None else nullcontext(),
        ):
            if config.engine == "wrk":
                figures, summary = run_wrk(load)
            else:
                figures, summary = run_k6(
                    load,
                    keep_latencies=phase == "run" and self.options.stream,
                    on_second=lambda second: progress.second(second, _latest_cores(sampler)),
                )
        self._keep_stacks(stacks)
        server = sampler.stats if sampler is not None else ServerSample()
        if probe is not None:
            server.dependency_rtt = probe.figures()
        if self.quota is not None and throttled_before is not None:
            server.throttling = (self.quota.throttling() - throttled_before).as_figures()
        if upstream_url:
            server.upstream = upstream_snapshot(upstream_url)
        if gauges is not None:
            server.gauges = gauges.to_json()
        if self.dsn:
            ingest_end = ingest_snapshot(base_url, api_key) if self.watch_backlog else {}
            rows = landed(self.dsn, window_start, db_now(self.dsn))
            server.ingest = ingest_figures(ingest_start, ingest_end, rows, figures.duration_s)
        failures = step_failures(figures, config.slo_p99_ms) + self.judge(server)
        verdict = "generator-bound" if figures.generator_bound else "pass" if not failures else "fail"
        progress.step_done(phase, rate if config.engine == "k6" else 0.0, figures, verdict)
        return Measured(figures, server, summary)

    def judge(self, server: ServerSample) -> list[str]:
        """Why the servers failed a step, beyond the generator's figures (the SLO, errors, drops)."""
        return backlog_failures(server.ingest) if self.backlog_stable else []

    def measure_rung(self) -> tuple[Measured, CapacityResult | None]:
        """Warm up, then measure the rung: one fixed-rate run, or a capacity search (and its best step)."""
        config = self.config
        if config.warmup_s > 0:
            self.measure(
                "warmup", self.search_plan().first_rate if config.capacity else config.rate, 1, config.warmup_s
            )
        if not config.capacity:
            return self.measure("run", config.rate, 1, config.duration_s), None
        return self._search_capacity()

    def search_plan(self) -> SearchPlan:
        """The rung's capacity search: from the calibration's estimate when there is one, steered by the
        share of its cores (or of its quota, when one is enforced) the target used."""
        config = self.config
        enforced = self.budget_m if self.quota is not None else None
        return SearchPlan(
            config.slo_p99_ms,
            config.start_rate,
            config.step_s,
            config.capacity_budget_s,
            config.max_rate,
            backlog_stable=self.backlog_stable,
            estimate=self.bench.estimates.get(self.rung.index),
            target_cores=target_cores(config, enforced),
        )

    def _search_capacity(self) -> tuple[Measured, CapacityResult]:
        config = self.config
        plan = self.search_plan()
        self.progress.note(plan.describe())
        summaries: dict[float, GeneratorSummary | None] = {}

        def step(rate: float, number: int) -> tuple[LoadFigures, ServerSample]:
            measured = self.measure("step", rate, number, config.step_s)
            summaries[rate] = measured.summary
            if step_failures(measured.figures, config.slo_p99_ms) + self.judge(measured.server):
                # Let the target work off what the overload queued: the next step must not inherit it.
                wait_until_idle(self._target_pids, target_cores(config, self.budget_m), IDLE_TIMEOUT_S)
                if self.watch_backlog and config.ingest_workers:
                    # and the backlog too: the next step's lag would otherwise include this one's
                    drain_ingest(self.base_url, self.bench.api_key, STEP_DRAIN_TIMEOUT_S)
            return measured.figures, measured.server

        capacity = search(plan, step, self.judge)
        shown = capacity.best if capacity.best is not None else min(capacity.steps, key=lambda s: s.rate)
        return Measured(shown.figures, shown.server, summaries.get(shown.rate)), capacity

    def finish(self) -> None:
        """Read the target's metrics after the load, and land what the rung left in the ingest backlog."""
        config = self.config
        self.metrics_after = scrape_metrics(self.base_url) if self.scrape else {}
        if self.watch_backlog and config.ingest_workers and not self.bench.owns_redis and not config.redis_io_threads:
            # The next rung's workers would otherwise land this rung's backlog (and count it as theirs).
            left = drain_ingest(self.base_url, self.bench.api_key)
            self.reset.append(INGEST_DRAINED if not left else f"ingest backlog NOT drained: {left} events left")

    def result(self, measured: Measured, capacity: CapacityResult | None) -> RungResult:
        """The repeat's `RungResult`: its figures, ceiling, verdict, and what was reset before it."""
        result = rung_result(
            self.rung, measured.figures, measured.server, measured.summary, capacity, self.metrics_before,
            self.metrics_after, time.monotonic() - self.started_at, self.judge(measured.server),
            self.budget_record(),
        )  # fmt: skip
        result.repeat = self.repeat + 1
        result.reset = self.reset
        if self.options.profile:
            missing = "" if self.stacks else self.stacks_missing or "no measured step was sampled"
            result.profile = RungProfile(
                rate_hz=self.options.profile_rate_hz, stacks=self.stacks, missing=missing,
                sampler_cpu_s=round(self.sampler_cpu_s, 3), sampled_s=round(self.sampled_s, 3),
            )  # fmt: skip
        return result

    def budget_record(self) -> BudgetRecord | None:
        if self.budget_m is None:
            missing = self.bench.budget_missing
            return BudgetRecord(asked="auto", missing=missing) if missing else None
        asked = self.config.cpu_budget
        quota = self.budget
        if not isinstance(quota, CpuBudget):
            missing = quota.label if quota is not None else "no CPU budget: the target is not local"
            return BudgetRecord(asked=asked, missing=missing, auto=self.bench.auto_note)
        return BudgetRecord(
            asked=asked, millicores=quota.millicores, period_us=quota.period_us, mechanism=quota.mechanism,
            auto=self.bench.auto_note,
        )  # fmt: skip

    def _sampler(self) -> TreeSampler | None:
        if self.target_pid is None:
            return None
        return TreeSampler(self.target_pid, cpu_set(self.config.cpus), known=self._known, nodes=self.nodes)

    def _stack_sampler(self, phase: str, step_dir: Path) -> StackSampler | None:
        """py-spy on the target's tree for a measured step (never the warm-up), on the generator's CPUs."""
        if not self.options.profile or phase == "warmup":
            return None
        if self.target_pid is None or self.nodes:
            self.stacks_missing = "only a local single-stack target is profiled"
            return None
        return StackSampler(self.target_pid, step_dir, self.options.profile_rate_hz, self.helper_cpus)

    def _keep_stacks(self, stacks: StackSampler | None) -> None:
        if stacks is None:
            return
        self.sampler_cpu_s += stacks.cpu_s
        self.sampled_s += stacks.wall_s
        if stacks.stacks is not None:
            self.stacks.append(str(stacks.stacks.relative_to(self.bench.out)))
        elif stacks.missing:
            self.stacks_missing = stacks.missing
            self.progress.note(f"no profile of this step: {stacks.missing}")

    def _target_pids(self) -> list[int]:
        """The target's process, or every API node's."""
        if self.nodes:
            return list(self.nodes.values())
        return [self.target_pid] if self.target_pid is not None else []

    def _known(self) -> dict[str, int]:
        """Every process the lab knows besides the target (or the API nodes), by role: the stack's, and
        what this rung started (its own Redis replaces the stack's under the same role)."""
        known = dict(self.bench.dependencies)
        target = {"target", *self.nodes}
        started = self.processes.started if self.processes is not None else []
        known.update({item.name: item.pid for item in started if item.name not in target})
        return known


def _latest_cores(sampler: TreeSampler | None) -> float | None:
    series = sampler.stats.series if sampler is not None else []
    return series[-1]["cpu_cores"] if series else None
