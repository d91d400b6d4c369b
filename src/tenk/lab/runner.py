"""Running a ladder: each rung's processes, warm-up, measurement (fixed rate or capacity search),
server figures, and the files in `results/<ladder>-<timestamp>/`."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenk.lab.capacity import SearchPlan, search, step_failures
from tenk.lab.errors import LabError
from tenk.lab.k6 import run_k6
from tenk.lab.ladder import Ladder, Rung
from tenk.lab.mixes import Mix
from tenk.lab.processes import (
    cpu_set,
    ensure_stack,
    other_cpus,
    process_set,
    start_target,
    start_upstream,
    start_workers,
)
from tenk.lab.progress import Progress, QuietProgress
from tenk.lab.results import LoadFigures
from tenk.lab.sampling import TreeSampler, metrics_delta, scrape_metrics
from tenk.lab.wrk import run_wrk

# Start-up, warm-up gaps, k6 graceful stop: the per-rung time beyond the measured seconds.
RUNG_OVERHEAD_S = 12.0
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


def rung_bound_s(rung: Rung) -> float:
    config = rung.config
    measured = config.capacity_budget_s if config.capacity else config.duration_s
    return config.warmup_s + measured + RUNG_OVERHEAD_S


def time_bound_s(ladder: Ladder) -> float:
    return sum(rung_bound_s(rung) for rung in ladder.rungs)


def _api_key(env: Mapping[str, str], ladder: Ladder) -> str:
    """The key for `auth = true` endpoints: TENK_LAB_API_KEY, else the dev key `tenk up` writes."""
    if env.get("TENK_LAB_API_KEY"):
        return env["TENK_LAB_API_KEY"]
    from tenk.lab.processes import stack_settings
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


def run_ladder(ladder: Ladder, options: RunOptions) -> Path:
    if options.segment and any(r.config.capacity for r in ladder.rungs):
        raise LabError("--segment splits a fixed rate across machines; capacity search cannot be split")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    suffix = f"-seg{options.segment.replace('/', 'of')}" if options.segment else ""
    out = options.results_root / f"{ladder.name}-{stamp}{suffix}"
    out.mkdir(parents=True, exist_ok=True)
    progress = options.progress
    bound = time_bound_s(ladder)
    progress.note(f"ladder {ladder.name!r}: {len(ladder.rungs)} rungs, at most ~{bound:.0f}s; results in {out}")
    env = dict(options.base_env)
    api_key = _api_key(env, ladder)
    stack = None
    started_at = time.monotonic()
    rungs: list[dict[str, Any]] = []
    try:
        if options.base_url is None and _needs_stack(ladder):
            stack = ensure_stack(env, other_cpus(ladder.rungs[0].config.cpus))
            env.update(stack.env)
        for rung in ladder.rungs:
            progress.rung(rung.index + 1, len(ladder.rungs), rung.label, rung.changed)
            result = run_rung(rung, ladder.mixes[rung.config.mix], env, api_key, out, options)
            (out / f"rung-{rung.index + 1:02d}.json").write_text(json.dumps(result, indent=2))
            rungs.append(result)
    finally:
        if stack is not None:
            for server in stack.started:
                server.stop()
        progress.close()
    from tenk.lab.report import write_reports

    results = {
        "ladder": ladder.name,
        "description": ladder.description,
        "source": str(ladder.path),
        "created": stamp,
        "segment": options.segment,
        "elapsed_s": round(time.monotonic() - started_at, 1),
        "time_bound_s": round(bound),
        "claims": [asdict(claim) for claim in ladder.claims],
        "rungs": rungs,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2))
    write_reports(results, out)
    return out


def run_rung(
    rung: Rung, mix: Mix, base_env: dict[str, str], api_key: str, out: Path, options: RunOptions
) -> dict[str, Any]:
    config = rung.config
    progress = options.progress
    helper_cpus = other_cpus(config.cpus)
    rung_dir = out / f"rung-{rung.index + 1:02d}"
    log = rung_dir / "generator.log"
    run_id = f"{out.name}-r{rung.index + 1}"
    started = time.monotonic()
    with process_set(rung_dir / "logs") as processes:
        env = {**base_env, **config.env}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
        target_pid: int | None = None
        if options.base_url is None:
            if mix.needs_upstream:
                env["TENK_UPSTREAM_URL"] = start_upstream(processes, config, helper_cpus, env)
            if config.ingest_workers:
                start_workers(processes, config.ingest_workers, helper_cpus, env)
            target, base_url = start_target(processes, config, env)
            target_pid = target.pid
        else:
            base_url = options.base_url.rstrip("/")
        scrape = config.is_tenk and options.base_url is None
        before = scrape_metrics(base_url) if scrape else {}

        def measure(
            phase: str, rate: float, number: int, duration_s: float
        ) -> tuple[LoadFigures, dict[str, Any], dict[str, Any]]:
            step_dir = rung_dir / f"{phase}-{number:02d}"

            def tick(elapsed: float) -> None:
                progress.step(phase, number, rate, elapsed, duration_s)

            sampler = TreeSampler(target_pid, cpu_set(config.cpus)) if target_pid is not None else None
            with sampler if sampler is not None else nullcontext():
                if config.engine == "wrk":
                    figures, raw = run_wrk(
                        mix, connections=config.connections, duration_s=duration_s, base_url=base_url,
                        api_key=api_key, run_id=run_id, workdir=step_dir, log=log, cpus=helper_cpus, on_tick=tick,
                    )  # fmt: skip
                else:
                    figures, raw = run_k6(
                        mix, rate=rate, duration_s=duration_s, slo_ms=config.slo_p99_ms, base_url=base_url,
                        api_key=api_key, run_id=f"{run_id}-{phase}{number}", workdir=step_dir, log=log,
                        cpus=helper_cpus, segment=options.segment, on_tick=tick,
                    )  # fmt: skip
            server = sampler.stats.to_json() if sampler is not None else {}
            failures = step_failures(figures, config.slo_p99_ms)
            verdict = "generator-bound" if figures.generator_bound else "pass" if not failures else "fail"
            progress.step_done(phase, rate if config.engine == "k6" else 0.0, figures, verdict)
            return figures, server, raw

        first_rate = config.start_rate if config.capacity else config.rate
        if config.warmup_s > 0:
            measure("warmup", first_rate, 1, config.warmup_s)
        capacity = None
        if config.capacity:
            plan = SearchPlan(
                config.slo_p99_ms, config.start_rate, config.step_s, config.capacity_budget_s, config.max_rate
            )
            progress.note(plan.describe())
            raws: dict[float, dict[str, Any]] = {}

            def step(rate: float, number: int) -> tuple[LoadFigures, dict[str, Any]]:
                figures, server, raw = measure("step", rate, number, config.step_s)
                raws[rate] = raw
                if step_failures(figures, config.slo_p99_ms):
                    time.sleep(1.0)  # let a queue built by an overload drain before the next step
                return figures, server

            capacity = search(plan, step)
            best = capacity.best
            if best is not None:
                figures, server, raw = best.figures, best.server, raws.get(best.rate, {})
            else:
                lowest = min(capacity.steps, key=lambda s: s.rate)
                figures, server, raw = lowest.figures, lowest.server, raws.get(lowest.rate, {})
        else:
            figures, server, raw = measure("run", config.rate, 1, config.duration_s)
        after = scrape_metrics(base_url) if scrape else {}
    return _rung_result(rung, figures, server, raw, capacity, before, after, time.monotonic() - started)


def _rung_result(
    rung: Rung,
    figures: LoadFigures,
    server: dict[str, Any],
    raw: dict[str, Any],
    capacity: Any,
    before: dict[str, float],
    after: dict[str, float],
    elapsed_s: float,
) -> dict[str, Any]:
    config = rung.config
    failures = step_failures(figures, config.slo_p99_ms)
    notes = []
    if config.engine == "wrk":
        notes.append("closed loop (wrk): latency hides queueing; throughput only")
    if rung.multi_variable:
        notes.append(f"multi-variable rung ({len(rung.changes)} changes): no single cause")
    neighbours = (server or {}).get("neighbour_cores_mean", 0.0)
    if neighbours > NEIGHBOUR_NOTE_CORES:
        notes.append(
            f"contended: other processes kept {neighbours:.2f} cores of the target's CPUs busy; "
            "latency and capacity move with them"
        )
    if capacity is not None:
        value = capacity.capacity
        ok = value > 0
        if capacity.generator_limited:
            notes.append("capacity is a lower bound: the generator, not the server, failed first")
        if not capacity.converged:
            notes.append("search ran out of steps before converging")
    else:
        value = figures.rps
        ok = not figures.generator_bound
        if figures.generator_bound:
            notes.append("generator-bound: not a server figure")
        elif failures:
            notes.append("; ".join(failures))
    return {
        "index": rung.index,
        "label": rung.label,
        "changed": rung.changed,
        "changes": [str(c) for c in rung.changes],
        "multi_variable": rung.multi_variable,
        "allow_multi": rung.allow_multi,
        "config": asdict(config),
        "mode": "capacity" if capacity is not None else "rate",
        "value": value,
        "figures": figures.to_json(),
        "server": server,
        "capacity": capacity.to_json() if capacity is not None else None,
        "metrics": {"scraped": bool(after), "delta": metrics_delta(before, after)},
        "k6_summary": raw,
        "verdict": {
            "server_figure": ok,
            "generator_bound": figures.generator_bound,
            "slo_met": not failures,
            "notes": notes,
        },
        "elapsed_s": round(elapsed_s, 1),
    }
