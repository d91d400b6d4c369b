"""Running a ladder: each rung's processes, warm-up, measurement (fixed rate or capacity search),
server figures, and the files in `results/<ladder>-<timestamp>/`."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from tenk.lab.cpus import cpu_set, other_cpus
from tenk.lab.definition.ladder import Ladder, Rung, RungConfig
from tenk.lab.definition.mixes import Mix
from tenk.lab.driving.k6 import run_k6
from tenk.lab.driving.summary import GeneratorSummary
from tenk.lab.driving.wrk import run_wrk
from tenk.lab.errors import LabError
from tenk.lab.measuring.bottleneck import attribute, ingest_behind, kept_up
from tenk.lab.measuring.capacity import SearchPlan, search, step_failures
from tenk.lab.measuring.cluster import ensure_cluster, start_nodes
from tenk.lab.measuring.processes import (
    ProcessSet,
    ensure_stack,
    process_set,
    start_redis,
    start_target,
    start_upstream,
    start_workers,
)
from tenk.lab.measuring.progress import Progress, QuietProgress
from tenk.lab.measuring.sampling import (
    GaugeWatcher,
    TreeSampler,
    listener_pid,
    metrics_delta,
    metrics_gauges,
    scrape_metrics,
)
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
from tenk.lab.results.documents import (
    Bottleneck,
    CapacityResult,
    LoadFigures,
    Metrics,
    Results,
    RungResult,
    RungSettings,
    ServerSample,
    Verdict,
)
from tenk.lab.results.summary import summarise_rung
from tenk.stack import EmbeddedRedis

# Start-up, warm-up gaps, k6 graceful stop: the per-rung time beyond the measured seconds.
RUNG_OVERHEAD_S = 12.0
# After a step whose backlog grew, the workers get this long to land it before the next step.
STEP_DRAIN_TIMEOUT_S = 10.0
# Other processes busy on the target's CPUs beyond this many cores make the rung's figures suspect.
NEIGHBOUR_NOTE_CORES = 0.15


@dataclass
class RunOptions:
    results_root: Path = Path("results")
    segment: str = ""
    # A target already running elsewhere (generator-only machines): no processes, no server figures.
    base_url: str | None = None
    base_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    progress: Progress = field(default_factory=QuietProgress)
    repeats: int | None = None  # None: the ladder's `repeats`
    # Fixed-rate runs stream every request from k6 (latency histogram, live per-second view).
    # Off, the generator does less work: compare its CPU both ways to measure what the stream costs.
    stream: bool = True
    # FLUSHDB before each rung repeat. None: only a Redis the lab started itself (never a user's).
    flush_redis: bool | None = None


def rung_bound_s(rung: Rung) -> float:
    config = rung.config
    measured = config.capacity_budget_s if config.capacity else config.duration_s
    return config.warmup_s + measured + RUNG_OVERHEAD_S


def time_bound_s(ladder: Ladder, repeats: int | None = None) -> float:
    return (repeats or ladder.repeats) * sum(rung_bound_s(rung) for rung in ladder.rungs)


def plan_text(ladder: Ladder, repeats: int | None = None) -> str:
    """What `run` would do, without starting anything: each rung, what it changes, how it is
    measured, and the time bound."""
    count = repeats or ladder.repeats
    lines = [
        f"ladder {ladder.name!r} ({ladder.path}): {ladder.description}",
        f"{len(ladder.rungs)} rungs x {count} repeats, interleaved (every rung once per round)",
    ]
    for rung in ladder.rungs:
        config = rung.config
        if config.capacity:
            how = (
                f"capacity search from {config.start_rate:g} req/s, steps of {config.step_s:g}s, "
                f"<= {config.capacity_budget_s:g}s, SLO p99 {config.slo_p99_ms:g} ms"
            )
        elif config.engine == "wrk":
            how = f"wrk, {config.connections} connections, {config.duration_s:g}s (closed loop)"
        else:
            how = f"{config.rate:g} req/s for {config.duration_s:g}s, SLO p99 {config.slo_p99_ms:g} ms"
        if config.pass_if_backlog_stable:
            how += ", and the ingest backlog must not grow"
        if config.redis_io_threads:
            how += f"; a private Redis, io-threads {config.redis_io_threads}"
        nodes = f"{config.apis} API node(s) behind HAProxy, each " if ladder.topology == "cluster" else "target "
        lines.append(
            f"  {rung.index + 1}. {rung.label}: {rung.changed}\n"
            f"     {nodes}{config.target} on {config.server} x{config.workers}, CPU {config.cpus}; "
            f"mix {config.mix}; warm-up {config.warmup_s:g}s; {how}; <= {rung_bound_s(rung):.0f}s a repeat"
        )
    lines.append(f"time bound: {time_bound_s(ladder, count):.0f}s; nothing was started (--dry-run)")
    return "\n".join(lines)


def _api_key(env: Mapping[str, str], ladder: Ladder) -> str:
    """The key for `auth = true` endpoints: TENK_LAB_API_KEY, else the dev key `tenk up` writes."""
    if env.get("TENK_LAB_API_KEY"):
        return env["TENK_LAB_API_KEY"]
    from tenk.lab.measuring.processes import stack_settings
    from tenk.stack.devkey import ensure_dev_key

    needs_key = any(e.auth for mix in ladder.mixes.values() for e in mix.endpoints)
    if env.get("TENK_API_KEYS") and needs_key and any(r.config.is_tenk for r in ladder.rungs):
        raise LabError(
            "TENK_API_KEYS is set, so the dev key won't be accepted: set TENK_LAB_API_KEY to one of those keys"
        )
    key, _ = ensure_dev_key(stack_settings(env).data_dir)
    return key


def _needs_stack(ladder: Ladder) -> bool:
    return any(r.config.is_tenk or r.config.target.startswith("baseline:") for r in ladder.rungs)


def _dependency_pids(env: Mapping[str, str], stack_pids: Mapping[str, int]) -> dict[str, int]:
    """Postgres and Redis by role: embedded ones by pid, others by who listens on their URL's port."""
    from urllib.parse import urlsplit

    known = dict(stack_pids)
    for role, var in (("postgres", "TENK_DATABASE_URL"), ("redis", "TENK_REDIS_URL")):
        if role in known or not env.get(var):
            continue
        parts = urlsplit(env[var])
        if parts.hostname in ("127.0.0.1", "localhost", "::1") and parts.port:
            pid = listener_pid(parts.port)
            if pid is not None:
                known[role] = pid
    return known


def run_ladder(ladder: Ladder, options: RunOptions) -> Path:
    if options.segment and any(r.config.capacity for r in ladder.rungs):
        raise LabError("--segment splits a fixed rate across machines; capacity search cannot be split")
    from tenk.lab.results.provenance import provenance

    repeats = options.repeats or ladder.repeats
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    suffix = f"-seg{options.segment.replace('/', 'of')}" if options.segment else ""
    out = options.results_root / f"{ladder.name}-{stamp}{suffix}"
    out.mkdir(parents=True, exist_ok=True)
    progress = options.progress
    bound = time_bound_s(ladder, repeats)
    progress.note(
        f"ladder {ladder.name!r}: {len(ladder.rungs)} rungs x {repeats} repeats (interleaved), "
        f"at most ~{bound:.0f}s; results in {out}"
    )
    env = dict(options.base_env)
    api_key = _api_key(env, ladder)
    stack = None
    started_at = time.monotonic()
    measured: dict[int, list[RungResult]] = {rung.index: [] for rung in ladder.rungs}
    try:
        cluster = ladder.topology == "cluster"
        if options.base_url is None and _needs_stack(ladder):
            helpers = other_cpus(ladder.rungs[0].config.cpus)
            stack = ensure_cluster(env, helpers) if cluster else ensure_stack(env, helpers)
            env.update(stack.env)
        pids = stack.pids if stack is not None else {}
        # A cluster's members are all known by name (redis-<port>...): looking up "redis" by port would count one twice.
        dependencies = {} if options.base_url else dict(pids) if cluster else _dependency_pids(env, pids)
        owns_redis = options.flush_redis
        if cluster:
            owns_redis = False  # a Redis Cluster has no one FLUSHDB; ingest rungs drain their backlog instead
        elif owns_redis is None:
            owns_redis = stack is not None and any(isinstance(s, EmbeddedRedis) for s in stack.started)
        # Interleaved: every repeat runs every rung once, so slow drift (thermal, neighbours) hits all alike.
        for repeat in range(repeats):
            for rung in ladder.rungs:
                progress.rung(rung.index + 1, len(ladder.rungs), f"{rung.label} [{repeat + 1}/{repeats}]", rung.changed)
                result = run_rung(
                    rung, ladder.mixes[rung.config.mix], env, api_key, out, options, repeat, dependencies, owns_redis,
                    ladder.topology,
                )  # fmt: skip
                measured[rung.index].append(result)
    finally:
        if stack is not None:
            for server in stack.started:
                server.stop()
        progress.close()
    from tenk.lab.results.report import write_reports

    rungs = [summarise_rung(measured[rung.index]) for rung in ladder.rungs if measured[rung.index]]
    for rung_result in rungs:
        (out / f"rung-{rung_result.index + 1:02d}.json").write_text(rung_result.model_dump_json(indent=2))
    results = Results(
        ladder=ladder.name,
        description=ladder.description,
        source=str(ladder.path),
        created=stamp,
        segment=options.segment,
        repeats=repeats,
        elapsed_s=round(time.monotonic() - started_at, 1),
        time_bound_s=round(bound),
        provenance=provenance(ladder, env),
        claims=list(ladder.claims),
        rungs=rungs,
    )
    (out / "results.json").write_text(results.model_dump_json(indent=2))
    write_reports(results, out)
    return out


def run_rung(
    rung: Rung,
    mix: Mix,
    base_env: dict[str, str],
    api_key: str,
    out: Path,
    options: RunOptions,
    repeat: int = 0,
    dependencies: Mapping[str, int] | None = None,
    owns_redis: bool = False,
    topology: str = "single",
) -> RungResult:
    config = rung.config
    progress = options.progress
    helper_cpus = other_cpus(config.cpus)
    rung_dir = out / f"rung-{rung.index + 1:02d}" / f"repeat-{repeat + 1}"
    log = rung_dir / "generator.log"
    run_id = f"{out.name}-r{rung.index + 1}-{repeat + 1}"
    started = time.monotonic()
    local = options.base_url is None
    reset: list[str] = []
    with process_set(rung_dir / "logs") as processes:
        env = {**base_env, **config.env}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
        target_pid: int | None = None
        nodes: dict[str, int] = {}
        upstream_token = ""
        if local and config.redis_io_threads:
            env["TENK_REDIS_URL"] = start_redis(processes, config.redis_io_threads, helper_cpus, env)
            reset.append(f"{REDIS_PRIVATE}, io-threads {config.redis_io_threads}")
        elif local and owns_redis and env.get("TENK_REDIS_URL"):
            flush_redis(env["TENK_REDIS_URL"])
            reset.append(REDIS_FLUSHED)
        if local:
            reset.append(TARGET_RESET)
            if mix.needs_upstream:
                reset.append(UPSTREAM_RESET)
                env["TENK_UPSTREAM_URL"], upstream_token = start_upstream(processes, config, helper_cpus, env)
            if config.ingest_workers:
                start_workers(processes, config.ingest_workers, helper_cpus, env)
            if topology == "cluster":
                nodes, base_url = start_nodes(processes, config, env, helper_cpus)
                target_pid = next(iter(nodes.values()))
            else:
                target, base_url = start_target(processes, config, env)
                target_pid = target.pid
        else:
            base_url = (options.base_url or "").rstrip("/")
        # Behind HAProxy, /metrics is one node's, a different one each time: not the target's figures.
        scrape = config.is_tenk and local and not nodes
        # Rows landed and their lag come from Postgres, for every target; the backlog from tenk's stats.
        dsn = env.get("TENK_DATABASE_URL", "") if local and mix.needs_ingest else ""
        watch_backlog = bool(dsn) and config.is_tenk
        # Gauges are polled each second only where their peak is the point: parked upstream calls, backlog.
        watch_gauges = scrape and (mix.needs_upstream or mix.needs_ingest)
        before = scrape_metrics(base_url) if scrape else {}

        def measure(
            phase: str, rate: float, number: int, duration_s: float
        ) -> tuple[LoadFigures, ServerSample, GeneratorSummary]:
            step_dir = rung_dir / f"{phase}-{number:02d}"

            def tick(elapsed: float) -> None:
                progress.step(phase, number, rate, elapsed, duration_s)

            sampler = (
                TreeSampler(
                    target_pid,
                    cpu_set(config.cpus),
                    known=lambda: _known(processes, dependencies, nodes),
                    nodes=nodes,
                )
                if target_pid is not None
                else None
            )
            upstream_url = env.get("TENK_UPSTREAM_URL", "") if options.base_url is None else ""
            if upstream_url:
                reset_upstream(upstream_url, upstream_token)
            ingest_start = ingest_snapshot(base_url, api_key) if watch_backlog else {}
            window_start = db_now(dsn) if dsn else None
            gauges = GaugeWatcher(base_url) if watch_gauges else None
            summary: GeneratorSummary
            with sampler if sampler is not None else nullcontext(), gauges if gauges is not None else nullcontext():
                if config.engine == "wrk":
                    figures, summary = run_wrk(
                        mix, connections=config.connections, duration_s=duration_s, base_url=base_url,
                        api_key=api_key, run_id=run_id, workdir=step_dir, log=log, cpus=helper_cpus, on_tick=tick,
                    )  # fmt: skip
                else:
                    figures, summary = run_k6(
                        mix, rate=rate, duration_s=duration_s, slo_ms=config.slo_p99_ms, base_url=base_url,
                        api_key=api_key, run_id=f"{run_id}-{phase}{number}", workdir=step_dir, log=log,
                        cpus=helper_cpus, segment=options.segment, on_tick=tick,
                        keep_latencies=phase == "run" and options.stream,
                        on_second=lambda second: progress.second(second, _latest_cores(sampler)),
                    )  # fmt: skip
            server = sampler.stats if sampler is not None else ServerSample()
            if upstream_url:
                server.upstream = upstream_snapshot(upstream_url)
            if gauges is not None:
                server.gauges = gauges.to_json()
            if dsn:
                ingest_end = ingest_snapshot(base_url, api_key) if watch_backlog else {}
                rows = landed(dsn, window_start, db_now(dsn))
                server.ingest = ingest_figures(ingest_start, ingest_end, rows, figures.duration_s)
            failures = step_failures(figures, config.slo_p99_ms) + judge(server)
            verdict = "generator-bound" if figures.generator_bound else "pass" if not failures else "fail"
            progress.step_done(phase, rate if config.engine == "k6" else 0.0, figures, verdict)
            return figures, server, summary

        def judge(server: ServerSample) -> list[str]:
            return backlog_failures(server.ingest) if config.pass_if_backlog_stable else []

        first_rate = config.start_rate if config.capacity else config.rate
        if config.warmup_s > 0:
            measure("warmup", first_rate, 1, config.warmup_s)
        capacity = None
        if config.capacity:
            plan = SearchPlan(
                config.slo_p99_ms,
                config.start_rate,
                config.step_s,
                config.capacity_budget_s,
                config.max_rate,
                backlog_stable=config.pass_if_backlog_stable,
            )
            progress.note(plan.describe())
            summaries: dict[float, GeneratorSummary] = {}

            def step(rate: float, number: int) -> tuple[LoadFigures, ServerSample]:
                figures, server, summary = measure("step", rate, number, config.step_s)
                summaries[rate] = summary
                if step_failures(figures, config.slo_p99_ms) + judge(server):
                    time.sleep(1.0)  # let a queue built by an overload drain before the next step
                    if watch_backlog and config.ingest_workers:
                        # and the backlog too: the next step's lag would otherwise include this one's
                        drain_ingest(base_url, api_key, STEP_DRAIN_TIMEOUT_S)
                return figures, server

            capacity = search(plan, step, judge)
            best = capacity.best
            if best is not None:
                figures, server, summary = best.figures, best.server, summaries.get(best.rate)
            else:
                lowest = min(capacity.steps, key=lambda s: s.rate)
                figures, server, summary = lowest.figures, lowest.server, summaries.get(lowest.rate)
        else:
            figures, server, summary = measure("run", config.rate, 1, config.duration_s)
        after = scrape_metrics(base_url) if scrape else {}
        if watch_backlog and config.ingest_workers and not owns_redis and not config.redis_io_threads:
            # The next rung's workers would otherwise land this rung's backlog (and count it as theirs).
            left = drain_ingest(base_url, api_key)
            reset.append(INGEST_DRAINED if not left else f"ingest backlog NOT drained: {left} events left")
    result = _rung_result(
        rung, figures, server, summary, capacity, before, after, time.monotonic() - started, judge(server)
    )
    result.repeat = repeat + 1
    result.reset = reset
    return result


def _latest_cores(sampler: TreeSampler | None) -> float | None:
    series = sampler.stats.series if sampler is not None else []
    return series[-1]["cpu_cores"] if series else None


def _known(
    processes: ProcessSet, dependencies: Mapping[str, int] | None, nodes: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Every process the lab knows besides the target (or the API nodes), by role: what it started, and the stack."""
    known = dict(dependencies or {})
    target = {"target", *(nodes or {})}
    # A rung's own server (its private Redis) replaces the stack's under the same role.
    known.update({item.name: item.pid for item in processes.started if item.name not in target})
    return known


def target_cores(config: RungConfig) -> float:
    """The most CPU the target can use: its pinned cores, or its process count (every node's) if fewer."""
    return float(min(len(cpu_set(config.cpus)), config.apis * max(1, config.workers)))


def _ceiling(
    capacity: CapacityResult | None,
    figures: LoadFigures,
    server: ServerSample,
    config: RungConfig,
    extra_failures: list[str] | None = None,
) -> Bottleneck:
    """The bottleneck at the lowest failing rate (the ceiling), or `kept_up` when no step failed."""
    cores = target_cores(config)
    if capacity is not None:
        # A rate fails when its last step failed: a failure measured again and passed was a stall.
        last_at_rate = {step.rate: step for step in capacity.steps}
        failing = [step for step in last_at_rate.values() if not step.passed]
        if not failing:
            return kept_up()
        step = min(failing, key=lambda s: s.rate)
        figures, server = step.figures, step.server
    elif not step_failures(figures, config.slo_p99_ms) and not extra_failures:
        return kept_up()
    slo_failures = step_failures(figures, config.slo_p99_ms)
    if config.pass_if_backlog_stable and server.ingest.get("backlog_grew"):
        # The backlog grew even at the rate the generator managed to offer, so the writers were behind
        # whatever else failed the step (a busy generator dropping iterations, say): name them.
        return ingest_behind(server, also=slo_failures)
    return attribute(figures, server, cores)


def _ms_per_request(cores: Mapping[str, float], goodput: float) -> dict[str, float]:
    """Mean cores busy -> CPU ms per successful request, by name."""
    return {name: round(busy * 1000 / goodput, 4) for name, busy in cores.items()} if goodput > 0 else {}


def cpu_ms_per_request(server: ServerSample, goodput: float) -> dict[str, float]:
    """CPU ms per successful request for the target and every other sampled process."""
    if server.cpu_cores_mean is None:
        return {}
    return _ms_per_request({"target": server.cpu_cores_mean, **server.roles_cores_mean}, goodput)


def cpu_ms_per_node(server: ServerSample, goodput: float) -> dict[str, float]:
    """CPU ms per successful request spent in each API node (cluster rungs; empty otherwise)."""
    return _ms_per_request(server.node_cores_mean, goodput)


def _rung_result(
    rung: Rung,
    figures: LoadFigures,
    server: ServerSample,
    summary: GeneratorSummary | None,
    capacity: CapacityResult | None,
    before: dict[str, float],
    after: dict[str, float],
    elapsed_s: float,
    extra_failures: list[str] | None = None,
) -> RungResult:
    config = rung.config
    failures = step_failures(figures, config.slo_p99_ms) + list(extra_failures or [])
    notes = []
    if config.engine == "wrk":
        notes.append("closed loop (wrk): latency hides queueing; throughput only")
    if rung.multi_variable:
        notes.append(f"multi-variable rung ({len(rung.changes)} changes): no single cause")
    neighbours = server.neighbour_cores_mean or 0.0
    if neighbours > NEIGHBOUR_NOTE_CORES:
        notes.append(
            f"contended: other processes kept {neighbours:.2f} cores of the target's CPUs busy; "
            "latency and capacity move with them"
        )
    bottleneck = _ceiling(capacity, figures, server, config, list(extra_failures or []))
    if capacity is not None:
        value = capacity.capacity
        # A capacity is the target's only when the target itself ran out of CPU at the ceiling.
        ok = value > 0 and bottleneck.is_target
        if capacity.generator_limited:
            notes.append("capacity is a lower bound: the generator, not the server, failed first")
        if not capacity.converged:
            notes.append("search ran out of steps before converging")
    else:
        value = figures.rps
        ok = not figures.generator_bound and bottleneck.kind in ("none", "target")
        if figures.generator_bound:
            notes.append("generator-bound: not a server figure")
        elif failures:
            notes.append("; ".join(failures))
    cpu_ms = cpu_ms_per_request(server, figures.rps)
    return RungResult(
        index=rung.index,
        label=rung.label,
        changed=rung.changed,
        changes=[str(c) for c in rung.changes],
        multi_variable=rung.multi_variable,
        allow_multi=rung.allow_multi,
        config=cast(RungSettings, asdict(config)),  # RungSettings names RungConfig's fields
        mode="capacity" if capacity is not None else "rate",
        value=value,
        figures=figures,
        server=server,
        capacity=capacity,
        metrics=Metrics(scraped=bool(after), delta=metrics_delta(before, after), gauges=metrics_gauges(after)),
        bottleneck=bottleneck,
        cpu_ms=cpu_ms,
        cpu_ms_per_node=cpu_ms_per_node(server, figures.rps),
        projected_rps_per_core=round(1000 / cpu_ms["target"], 1) if cpu_ms.get("target") else None,
        k6_summary=summary.as_written() if summary is not None else {},
        verdict=Verdict(
            server_figure=ok,
            ceiling=bottleneck.phrase(),
            generator_bound=figures.generator_bound,
            slo_met=not failures,
            notes=notes,
        ),
        elapsed_s=round(elapsed_s, 1),
    )
