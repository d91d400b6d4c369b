"""What one repeat of a rung adds up to: its ceiling, its CPU per request, its verdict and notes, as the
`RungResult` the results stage reads. Pure functions of what was measured; nothing here starts or drives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import cast

from tenk.lab.cpus import cpu_set
from tenk.lab.definition.ladder import Rung, RungConfig
from tenk.lab.documents import (
    Bottleneck,
    BudgetRecord,
    CapacityResult,
    LoadFigures,
    Metrics,
    RungResult,
    RungSettings,
    ServerSample,
    Verdict,
)
from tenk.lab.driving.k6 import collected_inside_the_run
from tenk.lab.driving.summary import GeneratorSummary
from tenk.lab.measuring.bottleneck import attribute, ingest_behind, kept_up, not_converged, outside_cores
from tenk.lab.measuring.capacity import step_failures
from tenk.lab.measuring.sampling import metrics_delta, metrics_gauges

# Other processes busy on the target's CPUs beyond this many cores make the rung's figures suspect.
NEIGHBOUR_NOTE_CORES = 0.15
# A core this busy had nothing left to give: under a CPU budget, the budget was not alone in the limit.
FULL_CORE = 0.95


def target_cores(config: RungConfig, budget_m: int | None = None) -> float:
    """The most CPU the target can use: its pinned cores, or its process count (every node's) if fewer,
    or its CPU budget if that is less still."""
    cores = float(min(len(cpu_set(config.cpus)), config.apis * max(1, config.workers)))
    return min(cores, budget_m / 1000) if budget_m else cores


def ceiling(
    capacity: CapacityResult | None,
    figures: LoadFigures,
    server: ServerSample,
    config: RungConfig,
    extra_failures: list[str] | None = None,
    budget_m: int | None = None,
) -> Bottleneck:
    """The bottleneck at the lowest failing rate (the ceiling), `kept_up` when no step failed, or
    `not_converged` when the search stopped short of bracketing a capacity: then no rate it tried is known
    to be the ceiling, and nobody, the target least of all, is named for it."""
    cores = target_cores(config, budget_m)
    if capacity is not None and not capacity.converged:
        return not_converged(capacity)
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
    return attribute(figures, server, cores, config.slo_p99_ms)


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


def rung_result(
    rung: Rung,
    figures: LoadFigures,
    server: ServerSample,
    summary: GeneratorSummary | None,
    capacity: CapacityResult | None,
    before: dict[str, float],
    after: dict[str, float],
    elapsed_s: float,
    extra_failures: list[str] | None = None,
    budget: BudgetRecord | None = None,
) -> RungResult:
    config = rung.config
    failures = step_failures(figures, config.slo_p99_ms) + list(extra_failures or [])
    notes = _notes(rung, figures, server, budget)
    budget_m = budget.millicores if budget is not None else None
    bottleneck = ceiling(capacity, figures, server, config, list(extra_failures or []), budget_m)
    value, ok = _headline(rung, capacity, figures, bottleneck, failures, notes)
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
        cpu_budget=budget,
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


def _notes(rung: Rung, figures: LoadFigures, server: ServerSample, budget: BudgetRecord | None) -> list[str]:
    """What a reader of the repeat's figures should know of how they were measured: the engine, a
    multi-variable rung, busy neighbours or full cores, a missing budget, a generator that collected."""
    notes = []
    if rung.config.engine == "wrk":
        notes.append("closed loop (wrk): latency hides queueing; throughput only")
    if rung.multi_variable:
        notes.append(f"multi-variable rung ({len(rung.changes)} changes): no single cause")
    neighbours = server.neighbour_cores_mean or 0.0
    if budget is not None and budget.millicores is not None:
        # Under a quota the dependencies share the target's cores by design; they matter only when those
        # cores ran out, so that the core, not the quota, may have held the target back.
        busy = [server.core_busy_mean.get(str(cpu), 0.0) for cpu in server.target_cpus]
        if busy and min(busy) >= FULL_CORE:
            # Only the lab's own dependencies are the target's by design; the rest is another job's.
            ours, others = outside_cores(server)
            notes.append(
                f"the target's cores were {min(busy):.0%} busy (its dependencies {ours:.2f} cores, "
                f"other processes {others:.2f}): the core, not the CPU budget, may have set the limit"
            )
    elif neighbours > NEIGHBOUR_NOTE_CORES:
        notes.append(
            f"contended: other processes kept {neighbours:.2f} cores of the target's CPUs busy; "
            "latency and capacity move with them"
        )
    if budget is not None and budget.missing:
        notes.append(budget.missing)
    if (collected := collected_inside_the_run(figures)) is not None:
        notes.append(collected)
    return notes


def _headline(
    rung: Rung,
    capacity: CapacityResult | None,
    figures: LoadFigures,
    bottleneck: Bottleneck,
    failures: list[str],
    notes: list[str],
) -> tuple[float, bool]:
    """The repeat's figure (its capacity, or its goodput at the fixed rate) and whether it is the target's
    own; what limits its meaning is added to `notes`."""
    if capacity is not None:
        value = capacity.capacity
        # A capacity is the target's only when its search bracketed it and the target itself set the ceiling.
        ok = value > 0 and capacity.converged and bottleneck.is_target
        if capacity.generator_limited:
            notes.append("capacity is a lower bound: the generator, not the server, failed first")
        if rung.expect_bound == "target" and not ok:
            found = "no step within the SLO" if value == 0 else bottleneck.phrase()
            notes.append(f'expected to be target-bound (expect_bound = "target"), but: {found}')
        return value, ok
    ok = not figures.generator_bound and bottleneck.kind in ("none", "target")
    if figures.generator_bound:
        notes.append("generator-bound: not a server figure")
    elif failures:
        notes.append("; ".join(failures))
    return figures.rps, ok
