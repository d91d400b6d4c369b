"""Running a ladder: the stack its rungs share, and every rung's repeats interleaved (each one a `RungRun`,
see `rung.py`), each repeat's rung document kept in `results/<ladder>-<timestamp>/` as it is measured.
`results.record` writes down the rest."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from tenk.lab.cpus import LAB_CPUS, cpu_set, generator_cores, other_cpus, pin_tree
from tenk.lab.definition.ladder import Ladder, Rung
from tenk.lab.documents import BudgetProvenance, RungResult
from tenk.lab.errors import LabError
from tenk.lab.measuring.auto_budget import (
    PROBE_RATE,
    PROBE_S,
    RULE,
    AutoBudget,
    OperatingPoint,
    Probe,
    choose_budget,
    default_budget,
    second_probe_rate,
)
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.outcome import cpu_ms_per_request
from tenk.lab.measuring.rung import Bench, Measured, RungRun, run_rung
from tenk.lab.measuring.sampling import server_pid
from tenk.lab.processes.cluster import ensure_cluster
from tenk.lab.processes.cpubudget import (
    CGROUP_ROOT,
    PERIOD_US,
    CpuBudget,
    NoBudget,
    budget_millicores,
    check_budget_fits,
)
from tenk.lab.processes.cpubudget import open_budget as try_budget
from tenk.lab.processes.servers import ensure_stack, process_set
from tenk.stack import EmbeddedRedis

# Start-up, warm-up gaps, k6 graceful stop: the per-rung time beyond the measured seconds.
RUNG_OVERHEAD_S = 12.0


def rung_bound_s(rung: Rung) -> float:
    config = rung.config
    measured = config.capacity_budget_s if config.capacity else config.duration_s
    return config.warmup_s + measured + RUNG_OVERHEAD_S


def time_bound_s(ladder: Ladder, repeats: int | None = None) -> float:
    return (repeats or ladder.repeats) * sum(rung_bound_s(rung) for rung in ladder.rungs)


def with_default_budget(ladder: Ladder, env: Mapping[str, str]) -> Ladder:
    """The ladder with every rung that sets no `cpu_budget` given the run's default (`default_budget`)."""
    default = default_budget(env)
    rungs = tuple(
        replace(rung, config=replace(rung.config, cpu_budget=rung.config.cpu_budget or default))
        for rung in ladder.rungs
    )
    return replace(ladder, rungs=rungs)


def plan_text(ladder: Ladder, repeats: int | None = None, env: Mapping[str, str] | None = None) -> str:
    """What `run` would do, without starting anything: each rung, what it changes, how it is
    measured, and the time bound."""
    ladder = with_default_budget(ladder, os.environ if env is None else env)
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
        budget = f", CPU budget {config.cpu_budget}" if config.cpu_budget not in ("", "none") else ""
        lines.append(
            f"  {rung.index + 1}. {rung.label}: {rung.changed}\n"
            f"     {nodes}{config.target} on {config.server} x{config.workers}, CPU {config.cpus}{budget}; "
            f"mix {config.mix}; warm-up {config.warmup_s:g}s; {how}; <= {rung_bound_s(rung):.0f}s a repeat"
        )
    if any(rung.config.cpu_budget == "auto" for rung in ladder.rungs):
        lines.append(RULE + f" (adds up to about {2 * PROBE_S + 14:.0f}s a rung)")
    lines.append(f"time bound: {time_bound_s(ladder, count):.0f}s; nothing was started (--dry-run)")
    return "\n".join(lines)


def _api_key(env: Mapping[str, str], ladder: Ladder) -> str:
    """The key for `auth = true` endpoints: TENK_LAB_API_KEY, else the dev key `tenk up` writes."""
    if env.get("TENK_LAB_API_KEY"):
        return env["TENK_LAB_API_KEY"]
    from tenk.lab.processes.servers import stack_settings
    from tenk.stack.devkey import ensure_dev_key

    needs_key = any(e.auth for mix in ladder.mixes.values() for e in mix.endpoints)
    if env.get("TENK_API_KEYS") and needs_key and any(r.config.is_tenk for r in ladder.rungs):
        raise LabError(
            "TENK_API_KEYS is set, so the dev key won't be accepted: set TENK_LAB_API_KEY to one of those keys"
        )
    key, _ = ensure_dev_key(stack_settings(env).data_dir)
    return key


def _needs_stack(ladder: Ladder) -> bool:
    return any(r.config.is_ours for r in ladder.rungs)


def _dependency_pids(env: Mapping[str, str], stack_pids: Mapping[str, int]) -> dict[str, int]:
    """Postgres and Redis by role: embedded ones by pid, others by who serves their URL's port or socket."""
    known = dict(stack_pids)
    for role, var in (("postgres", "TENK_DATABASE_URL"), ("redis", "TENK_REDIS_URL")):
        if role in known or not env.get(var):
            continue
        pid = server_pid(env[var])
        if pid is not None:
            known[role] = pid
    return known


@dataclass
class LadderRun:
    """What one run of a ladder has measured so far: `measure_ladder` fills it, `results.record` writes it down
    (from every repeat measured, or from those that finished when the run stopped early)."""

    ladder: Ladder
    options: RunOptions
    out: Path
    stamp: str
    repeats: int
    bound_s: float
    env: dict[str, str]
    started_at: float = field(default_factory=time.monotonic)
    measured: dict[int, list[RungResult]] = field(default_factory=dict)
    budget: BudgetProvenance = field(default_factory=lambda: BudgetProvenance())
    # Called with a rung's index each time one of its repeats is measured (the live view's verdict line).
    on_measured: Callable[[int], None] | None = None


def _check_budgets_fit(ladder: Ladder) -> None:
    """Refuse, before anything starts, a budget the target's cores cannot give once the generator has its own."""
    for rung in ladder.rungs:
        millicores = (
            None if rung.config.cpu_budget == "auto" else budget_millicores("cpu_budget", rung.config.cpu_budget)
        )
        if millicores is not None:
            target = len(cpu_set(rung.config.cpus))
            generator = generator_cores(rung.config.cpus)
            try:
                check_budget_fits(millicores, target + generator, generator)
            except LabError as exc:
                raise LabError(f"rung {rung.label!r}: {exc}") from None


@contextmanager
def _served(rung: Rung, ladder: Ladder, bench: Bench, folder: str, budget: str, rate: float) -> Iterator[RungRun]:
    """`rung` started with `budget` at fixed `rate` (its dependencies on the target's cores, where the
    budgeted rungs have them) and warmed up for 2 s; stopped, and its quota removed, afterwards."""
    served = replace(rung, config=replace(rung.config, cpu_budget=budget, capacity=False, rate=rate))
    run = RungRun(served, ladder.mixes[rung.config.mix], bench, 0, folder=folder)
    try:
        with process_set(run.dir / "logs") as processes:
            run.start(processes)
            for pid in [*bench.dependencies.values(), *(item.pid for item in processes.started)]:
                if pid != run.target_pid:
                    pin_tree(pid, cpu_set(rung.config.cpus))
            run.measure("warmup", rate, 1, 2.0)
            yield run
    finally:
        run.close()


def _probe(rung: Rung, ladder: Ladder, bench: Bench) -> Probe:
    """Serve `rung` unbudgeted at a light rate, then at a higher one, and read each party's CPU at both."""
    config = rung.config
    light = min(PROBE_RATE, config.start_rate if config.capacity else config.rate)
    with _served(rung, ladder, bench, f"probe/rung-{rung.index + 1:02d}", "none", light) as run:
        low = _probe_figures(light, run.measure("probe", light, 1, PROBE_S))
        high_rate = second_probe_rate(light, low[1].get("target") or math.inf)
        if high_rate is None:
            return Probe.from_cpu_ms(rung.label, low[1], low[2])
        high = _probe_figures(high_rate, run.measure("probe-high", high_rate, 1, PROBE_S))
    return Probe.from_two_rates(rung.label, low, high)


def _operating_point(choice: AutoBudget, rungs: list[Rung], ladder: Ladder, bench: Bench) -> OperatingPoint:
    """Serve the rung the chosen budget lets run fastest under that budget, at the rate it should saturate
    the target there, and read what the target and the generator used."""
    index, rate = choice.fastest()
    rung = rungs[index]
    folder = f"probe/budget-rung-{rung.index + 1:02d}"
    with _served(rung, ladder, bench, folder, f"{choice.millicores}m", rate) as run:
        measured = run.measure("probe-budget", rate, 1, PROBE_S)
    return OperatingPoint(rung.label, rate, measured.server.cpu_cores_mean or 0.0, measured.figures.generator_util)


def _probe_figures(rate: float, measured: Measured) -> tuple[float, dict[str, float], float]:
    """(rate, CPU ms per request by role, the generator's CPU ms per request) of one probe step."""
    figures = measured.figures
    generator_ms = figures.generator_cpu_s * 1000 / figures.requests if figures.requests else 0.0
    return rate, cpu_ms_per_request(measured.server, figures.rps), generator_ms


def _resolve_auto(ladder: Ladder, bench: Bench) -> tuple[Ladder, str, dict[int, float]]:
    """Replace `auto` with the budget the probes allow (or "none" where no quota can be set); say why, and
    what each probed rung should serve at that budget (by rung index)."""
    auto = [rung for rung in ladder.rungs if rung.config.cpu_budget == "auto"]
    estimates: dict[int, float] = {}
    if not auto:
        return ladder, "", estimates
    progress = bench.options.progress
    check = try_budget(1000, bench.cgroup_root, bench.cpu_period_us)
    if isinstance(check, NoBudget) or bench.options.base_url is not None or bench.topology == "cluster":
        why = check.label if isinstance(check, NoBudget) else "no CPU budget: the target is not started by the lab"
        if isinstance(check, CpuBudget):
            check.remove()
        progress.note(f'cpu_budget = "auto": {why}; the rungs run unbudgeted')
        chosen, note = "none", f"auto: {why}"
    else:
        check.remove()
        progress.note(RULE)
        probes = [_probe(rung, ladder, bench) for rung in auto]
        first = auto[0].config.cpus
        choice = choose_budget(probes, generator_cores(first) or 1, len(cpu_set(first)))
        choice = choice.confirmed(_operating_point(choice, auto, ladder, bench))
        estimates = {rung.index: rate for rung, rate in zip(auto, choice.saturation_rates(), strict=True) if rate > 0}
        note = choice.describe()
        progress.note(note)
        chosen = f"{choice.millicores}m"
    rungs = tuple(
        replace(rung, config=replace(rung.config, cpu_budget=chosen)) if rung.config.cpu_budget == "auto" else rung
        for rung in ladder.rungs
    )
    return replace(ladder, rungs=rungs), note, estimates


def begin_run(ladder: Ladder, options: RunOptions) -> LadderRun:
    """Check the ladder against the run's options and make its folder, before anything starts."""
    if options.segment and any(r.config.capacity for r in ladder.rungs):
        raise LabError("--segment splits a fixed rate across machines; capacity search cannot be split")
    repeats = options.repeats or ladder.repeats
    if ladder.profile and not options.profile:
        options = replace(options, profile=True)
    ladder = with_default_budget(ladder, options.base_env)
    _check_budgets_fit(ladder)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    suffix = f"-seg{options.segment.replace('/', 'of')}" if options.segment else ""
    out = options.results_root / f"{ladder.name}-{stamp}{suffix}"
    out.mkdir(parents=True, exist_ok=True)
    bound = time_bound_s(ladder, repeats)
    options.progress.note(
        f"ladder {ladder.name!r}: {len(ladder.rungs)} rungs x {repeats} repeats (interleaved), "
        f"at most ~{bound:.0f}s; results in {out}"
    )
    return LadderRun(ladder, options, out, stamp, repeats, bound, dict(options.base_env))


def measure_ladder(run: LadderRun) -> None:
    """Every rung of `run`'s ladder, `repeats` times interleaved, into `run.measured`; each repeat's rung
    document is written as soon as it is measured. Whatever the lab started is stopped, however this ends."""
    ladder, options, out, env = run.ladder, run.options, run.out, run.env
    progress = options.progress
    repeats = run.repeats
    api_key = _api_key(env, ladder)
    stack = None
    bench: Bench | None = None
    measured = run.measured = {rung.index: [] for rung in ladder.rungs}
    try:
        cluster = ladder.topology == "cluster"
        if options.base_url is None and _needs_stack(ladder):
            helpers = other_cpus(ladder.rungs[0].config.cpus)
            stack = ensure_cluster(env, helpers) if cluster else ensure_stack(env, helpers)
            env.update(stack.env)
            progress.note(f"data: {stack.data}")
        pids = stack.pids if stack is not None else {}
        # A cluster's members are all known by name (redis-<port>...): looking up "redis" by port would count one twice.
        dependencies = {} if options.base_url else dict(pids) if cluster else _dependency_pids(env, pids)
        owns_redis = options.flush_redis
        if cluster:
            owns_redis = False  # a Redis Cluster has no one FLUSHDB; ingest rungs drain their backlog instead
        elif owns_redis is None:
            owns_redis = stack is not None and any(isinstance(s, EmbeddedRedis) for s in stack.started)
        period_us = int(env.get("TENK_LAB_CPU_PERIOD_US") or PERIOD_US)
        cgroup_root = Path(env.get("TENK_LAB_CGROUP_ROOT") or CGROUP_ROOT)
        bench = Bench(
            env, api_key, out, options, dependencies, owns_redis, ladder.topology, period_us, cgroup_root,
            data=stack.data if stack is not None else "",
        )  # fmt: skip
        ladder, auto_note, estimates = _resolve_auto(ladder, bench)
        run.ladder = ladder
        missing = auto_note if auto_note.startswith("auto: ") else ""
        bench = replace(bench, auto_note="" if missing else auto_note, budget_missing=missing, estimates=estimates)
        run.budget = {"period_us": period_us, "default": default_budget(options.base_env), "auto": auto_note}
        # Interleaved: every repeat runs every rung once, so slow drift (thermal, neighbours) hits all alike.
        for repeat in range(repeats):
            for rung in ladder.rungs:
                progress.rung(rung.index + 1, len(ladder.rungs), f"{rung.label} [{repeat + 1}/{repeats}]", rung.changed)
                result = run_rung(rung, ladder.mixes[rung.config.mix], bench, repeat)
                measured[rung.index].append(result)
                # Kept as soon as it is measured: a crash or a Ctrl-C later loses none of it.
                (out / f"rung-{rung.index + 1:02d}-repeat-{repeat + 1}.json").write_text(
                    result.model_dump_json(indent=2)
                )
                if run.on_measured is not None:
                    run.on_measured(rung.index)
    finally:
        if stack is None and bench is not None:
            # Someone else's Postgres and Redis were moved onto the target's cores: give them the lab's back.
            for pid in bench.dependencies.values():
                pin_tree(pid, LAB_CPUS)
        if stack is not None:
            for server in reversed(stack.started):
                server.stop()
        progress.close()
