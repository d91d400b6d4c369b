"""Who set a ceiling: the target, the generator, a named dependency, or the target's neighbours.

A capacity is the target's only when the target had no CPU left (its cores >= 90 % busy with its
own work). With `topology = "cluster"` the target is every API node together: its cores are the
nodes' CPU set (or their process count, if fewer), and its busy share is the nodes' sum.
Otherwise the rate where the SLO broke says something about the machine, not the
server: Postgres and k6 sharing a saturated core, a generator out of CPU, a neighbour on the
target's core. Such a rung is reported as "≥ X req/s, limited by postgres on CPU 1", and a
comparison between such rungs is invalid: it would compare the neighbours.

Input: a step's `LoadFigures` and the sampler's `ServerSample`, plus how many cores the
target can use. Output: a `Bottleneck`.
"""

from __future__ import annotations

from tenk.lab.documents import (
    DEPENDENCY,
    GENERATOR,
    NEIGHBOURS,
    NONE,
    TARGET,
    UNDETERMINED,
    Bottleneck,
    LoadFigures,
    ServerSample,
)
from tenk.lab.driving.generator import GENERATOR_BOUND_UTIL

SATURATED = 0.90
# A budgeted target throttled in at least this share of its quota periods wanted more CPU than its
# budget most of the time: it is bound by its own CPU, whatever shares its core with it (by design, its
# dependencies do: tenk.lab.measuring.rung).
BUDGET_BOUND = 0.50
# A role must hold at least this share of a saturated core to be named as its consumer.
MIN_CONSUMER_SHARE = 0.25
GENERATORS = ("k6", "wrk")


def attribute(figures: LoadFigures, server: ServerSample, target_cores: float) -> Bottleneck:
    """Name the bottleneck of a step that failed (or of any step: the most loaded party wins).

    `target_cores` is what the target can use at most: its pinned CPUs, or fewer when it runs
    fewer processes than that (one event loop uses one core at most).
    """
    cpus = list(server.target_cpus)
    target_busy = (server.cpu_cores_mean or 0.0) / target_cores if target_cores else 0.0
    if target_busy >= SATURATED:
        detail = f"target {target_busy:.0%} busy on its {target_cores:g} core(s)" + _nodes(server)
        return Bottleneck(kind=TARGET, name=TARGET, cpus=cpus, detail=detail)
    throttled = _throttled_share(server)
    if throttled >= BUDGET_BOUND:
        detail = (
            f"target held to its CPU budget: throttled in {throttled:.0%} of its quota periods, "
            f"{target_busy:.0%} of the budget used on average" + _nodes(server)
        )
        return Bottleneck(kind=TARGET, name=TARGET, cpus=cpus, detail=detail)
    if figures.generator_util > GENERATOR_BOUND_UTIL:
        detail = f"{figures.engine} used {figures.generator_util:.0%} of its cores"
        return Bottleneck(kind=GENERATOR, name=figures.engine, detail=detail)
    core_busy = {int(cpu): share for cpu, share in server.core_busy_mean.items()}
    roles, role_cpus = server.roles_cores_mean, server.role_cpus
    saturated = sorted(cpu for cpu, share in core_busy.items() if share >= SATURATED and cpu not in cpus)
    for cpu in saturated:
        consumers = {
            role: cores / max(1, len(role_cpus.get(role) or core_busy))
            for role, cores in roles.items()
            if cpu in (role_cpus.get(role) or core_busy)
        }
        consumers = {role: share for role, share in consumers.items() if share >= MIN_CONSUMER_SHARE}
        if not consumers:
            continue
        top = max(consumers, key=lambda role: consumers[role])
        shares = ", ".join(f"{role} {share:.0%}" for role, share in sorted(consumers.items(), key=lambda i: -i[1]))
        kind = GENERATOR if top in GENERATORS else DEPENDENCY
        detail = f"CPU {cpu} {core_busy[cpu]:.0%} busy ({shares}); target {target_busy:.0%} busy"
        return Bottleneck(kind=kind, name=top, cpus=[cpu], detail=detail)
    neighbours = (server.neighbour_cores_mean or 0.0) / target_cores if target_cores else 0.0
    if cpus and target_busy + neighbours >= SATURATED and neighbours > 0.1:
        detail = f"other processes held {neighbours:.0%} of the target's cores; target {target_busy:.0%} busy"
        return Bottleneck(kind=NEIGHBOURS, name="neighbours", cpus=cpus, detail=detail)
    if figures.dropped > 0:
        # k6 drops an arrival when every VU of its pool is waiting for an answer. With its CPU to spare
        # (checked above) that is the answers' latency, not k6: the pool covers a latency far past the SLO.
        found = undetermined(server, target_busy)
        detail = (
            f"{figures.dropped} arrivals dropped with every VU waiting on an answer, {figures.engine} at "
            f"{figures.generator_util:.0%} of its cores: the answers' latency, not the generator; {found.detail}"
        )
        return Bottleneck(kind=UNDETERMINED, name=found.name, cpus=found.cpus, detail=detail)
    return undetermined(server, target_busy)


def _throttled_share(server: ServerSample) -> float:
    """The share of the target's quota periods in which it was throttled; 0 without a budget."""
    periods = server.throttling.get("periods", 0.0)
    return server.throttling.get("throttled", 0.0) / periods if periods else 0.0


def _nodes(server: ServerSample) -> str:
    """A cluster's target is every API node together: say what each held."""
    shares = ", ".join(f"{node} {cores:.2f}" for node, cores in sorted(server.node_cores_mean.items()))
    return f" (cores per node: {shares})" if shares else ""


def undetermined(server: ServerSample, target_busy: float) -> Bottleneck:
    """No core saturated: say who used what, and name the busiest party besides the target, so that a
    reader can tell a generator- or dependency-limited search from a target one that stalled."""
    roles = server.roles_cores_mean
    used = sorted(((cores, role) for role, cores in roles.items() if cores > 0), reverse=True)
    shares = ", ".join(f"{role} {cores:.2f} cores" for cores, role in used)
    detail = f"no core >= {SATURATED:.0%} busy; sampled CPU: target {target_busy:.0%} of its core(s)"
    if not used:
        return Bottleneck(kind=UNDETERMINED, name="", detail=detail + "; no other process sampled")
    top = used[0][1]
    cpus = list(server.role_cpus.get(top, []))
    return Bottleneck(
        kind=UNDETERMINED, name=top, cpus=cpus, detail=f"{detail}, {shares}; busiest besides the target: {top}"
    )


def ingest_behind(server: ServerSample, also: list[str] | None = None) -> Bottleneck:
    """The backlog grew: the writers set the ceiling. `also`: the step's other failures, if any."""
    ingest = server.ingest
    roles = server.roles_cores_mean
    workers = {role: cores for role, cores in roles.items() if role.startswith("worker")}
    used = ", ".join(f"{role} {cores:.2f} cores" for role, cores in sorted(workers.items()))
    detail = (
        f"backlog grew {ingest.get('backlog_start')} -> {ingest.get('backlog_end')} while "
        f"{ingest.get('rows_landed_per_s')} rows/s landed" + (f"; {used}" if used else "")
    )
    if also:
        detail += "; the step also failed: " + "; ".join(also)
    return Bottleneck(kind=DEPENDENCY, name="ingest workers", detail=detail)


def kept_up() -> Bottleneck:
    return Bottleneck(kind=NONE, name="", detail="every step kept the SLO")
