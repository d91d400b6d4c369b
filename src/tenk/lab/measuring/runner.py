"""Running a ladder: the stack its rungs share, every rung's repeats interleaved (each one a `RungRun`,
see `rung.py`), and the files in `results/<ladder>-<timestamp>/`."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tenk.lab.cpus import other_cpus
from tenk.lab.definition.ladder import Ladder, Rung
from tenk.lab.documents import Results, RungResult
from tenk.lab.errors import LabError
from tenk.lab.measuring.cluster import ensure_cluster
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.processes import ensure_stack
from tenk.lab.measuring.rung import Bench, run_rung
from tenk.lab.measuring.sampling import listener_pid
from tenk.lab.results.summary import summarise_rung
from tenk.stack import EmbeddedRedis

logger = logging.getLogger("tenk.lab.runner")

# Start-up, warm-up gaps, k6 graceful stop: the per-rung time beyond the measured seconds.
RUNG_OVERHEAD_S = 12.0


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


@dataclass
class _Run:
    """What one run of a ladder has measured so far, and how to write it down."""

    ladder: Ladder
    options: RunOptions
    out: Path
    stamp: str
    repeats: int
    bound_s: float
    env: dict[str, str]
    started_at: float = field(default_factory=time.monotonic)
    measured: dict[int, list[RungResult]] = field(default_factory=dict)

    def write(self, partial: str = "") -> Path:
        """results.json and the reports, from every repeat measured (or, when `partial` says why the run
        stopped early, from those that finished)."""
        from tenk.lab.results.provenance import provenance
        from tenk.lab.results.report import write_reports

        rungs = [summarise_rung(self.measured[r.index]) for r in self.ladder.rungs if self.measured.get(r.index)]
        for rung_result in rungs:
            (self.out / f"rung-{rung_result.index + 1:02d}.json").write_text(rung_result.model_dump_json(indent=2))
        results = Results(
            ladder=self.ladder.name,
            description=self.ladder.description,
            source=str(self.ladder.path),
            created=self.stamp,
            segment=self.options.segment,
            repeats=self.repeats,
            elapsed_s=round(time.monotonic() - self.started_at, 1),
            time_bound_s=round(self.bound_s),
            provenance=provenance(self.ladder, self.env),
            claims=list(self.ladder.claims),
            rungs=rungs,
            partial=partial,
        )
        (self.out / "results.json").write_text(results.model_dump_json(indent=2))
        write_reports(results, self.out)
        return self.out

    def write_partial(self) -> None:
        """After a run stopped early: what finished, marked partial. Never masks why it stopped."""
        done = sum(len(results) for results in self.measured.values())
        if not done:
            return
        partial = f"the run stopped after {done} of {self.repeats * len(self.ladder.rungs)} rung measurements"
        try:
            self.write(partial)
        except Exception:
            logger.exception("could not write the partial results to %s", self.out)
            return
        self.options.progress.note(f"partial results of what finished: {self.out / 'results.json'}")


def run_ladder(ladder: Ladder, options: RunOptions) -> Path:
    if options.segment and any(r.config.capacity for r in ladder.rungs):
        raise LabError("--segment splits a fixed rate across machines; capacity search cannot be split")
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
    run = _Run(ladder, options, out, stamp, repeats, bound, env)
    measured = run.measured = {rung.index: [] for rung in ladder.rungs}
    finished = False
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
        bench = Bench(env, api_key, out, options, dependencies, owns_redis, ladder.topology)
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
        finished = True
    finally:
        if stack is not None:
            for server in stack.started:
                server.stop()
        progress.close()
        if not finished:
            run.write_partial()
    return run.write()
