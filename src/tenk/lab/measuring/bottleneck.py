"""Who set a ceiling: the target, the generator, a named dependency, or the target's neighbours.

A capacity is the target's when the target had no CPU left (its cores >= 90 % busy with its own work, or
full with at most a tenth of them others', or its CPU budget spent), or when it waited on itself: no
core saturated, the generator with CPU to spare, and every dependency the lab runs answering a probe
promptly all through the step (blocking calls on an event loop, a pool too small, a connection per
request: the target's own design). With `topology = "cluster"` the target is every API node together:
its cores are the nodes' CPU set (or their process count, if fewer), and its busy share is the nodes'
sum.
A step whose generator dropped arrivals (its VU pool or its CPU ran out) is never the target's, whatever
its throttling says, unless the target was saturated and the generator had headroom: the load it measured
was not the load asked for. It is the generator's, unless a saturated core or crowding neighbours name
another party, or the generator had headroom and an endpoint's answers were slow enough, on average, to
need more VUs than k6 had started: then k6 dropped arrivals while it started more, the answers' doing, and
the step is named as one without drops.
Otherwise the rate where the SLO broke says something about the machine, not the
server: Postgres and k6 sharing a saturated core, a generator out of CPU, a neighbour on the
target's core. Such a rung is reported as "≥ X req/s, limited by postgres on CPU 1", and a
comparison with such a rung is inconclusive: it would compare the neighbours.

Input: a step's `LoadFigures` and the sampler's `ServerSample`, plus how many cores the
target can use. Output: a `Bottleneck`.
"""

from __future__ import annotations

from tenk.lab.documents import (
    DEPENDENCY,
    GENERATOR,
    GENERATORS,
    NEIGHBOURS,
    NONE,
    TARGET,
    UNCONVERGED,
    UNDETERMINED,
    Bottleneck,
    CapacityResult,
    LoadFigures,
    ServerSample,
)
from tenk.lab.driving.generator import GENERATOR_BOUND_UTIL

SATURATED = 0.90
# Other processes holding more than this share of the target's cores crowded it. At most this share, on
# cores they and the target filled, the target was short of its own CPU: on a busy CI host a spinner past
# its capacity held nearly all of its core, neighbours the rest (bc2478a), and that ceiling is the target's.
NEIGHBOUR_SHARE = 0.1
# A budgeted target throttled in at least this share of its quota periods wanted more CPU than its
# budget most of the time: it is bound by its own CPU, whatever shares its core with it (by design, its
# dependencies do: tenk.lab.measuring.rung).
BUDGET_BOUND = 0.50
# A role must hold at least this share of a saturated core to be named as its consumer.
MIN_CONSUMER_SHARE = 0.25
# A dependency whose median round trip for a trivial request (SELECT 1, PING, the mock vendor's /health)
# stayed within a tenth of the SLO (and at least PROMPT_MS) all through a step was not queueing requests:
# a queue that broke the SLO would hold even a trivial request far longer. From the lab's process, its
# GIL shared with the generator's reader, they stayed within PROMPT_MS beside a blocking target (3ab49c9);
# the probe's own delays make a dependency look slower, never faster.
PROMPT_MS = 5.0
PROMPT_SHARE_OF_SLO = 0.1
# Fewer round trips than this say too little about a step (a probe every 0.25 s: about a second's worth).
MIN_PROBES = 3


def attribute(
    figures: LoadFigures, server: ServerSample, target_cores: float, slo_ms: float | None = None
) -> Bottleneck:
    """Name the bottleneck of a step that failed (or of any step: the most loaded party wins).

    `target_cores` is what the target can use at most: its pinned CPUs, or fewer when it runs
    fewer processes than that (one event loop uses one core at most). `slo_ms`, the p99 the step was held
    to, sets how slowly a dependency may answer a probe and still count as not queueing.
    """
    cpus = list(server.target_cpus)
    target_busy = (server.cpu_cores_mean or 0.0) / target_cores if target_cores else 0.0
    neighbours = (server.neighbour_cores_mean or 0.0) / target_cores if target_cores else 0.0
    unbudgeted = not server.throttling.get("periods")
    full = bool(cpus) and unbudgeted and neighbours <= NEIGHBOUR_SHARE and target_busy + neighbours >= SATURATED
    # Arrivals the generator dropped leave the step the target's only if the target was saturated beside a
    # generator with headroom (`_dropped`): throttling, or waiting on itself, is no such evidence. Or if
    # k6 had CPU to spare and an endpoint's answers were slow enough to need more VUs than k6 started with
    # (requests in flight are rate x mean latency): then the drops are the answers' slowness, as k6 drops
    # arrivals while it starts VUs mid-run, and the step is named as if nothing had been dropped.
    headroom = figures.generator_util <= GENERATOR_BOUND_UTIL
    held = headroom and figures.dropped > 0 and any(e.outgrew_its_vus for e in figures.endpoints.values())
    own = figures.dropped == 0 or held or ((target_busy >= SATURATED or full) and headroom)
    if own and target_busy >= SATURATED:
        detail = f"target {target_busy:.0%} busy on its {target_cores:g} core(s)" + _nodes(server)
        return Bottleneck(kind=TARGET, name=TARGET, cpus=cpus, detail=detail)
    if own and full:
        detail = (
            f"target {target_busy:.0%} busy on its {target_cores:g} core(s), other processes {neighbours:.0%}: "
            "the cores were full, nearly all of it the target's" + _nodes(server)
        )
        return Bottleneck(kind=TARGET, name=TARGET, cpus=cpus, detail=detail)
    throttled = _throttled_share(server)
    if own and throttled >= BUDGET_BOUND:
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
    if cpus and neighbours > NEIGHBOUR_SHARE and _crowded(server, core_busy, target_busy + neighbours):
        detail = f"other processes held {neighbours:.0%} of the target's cores; target {target_busy:.0%} busy"
        return Bottleneck(kind=NEIGHBOURS, name="neighbours", cpus=cpus, detail=detail)
    if not own:
        return _dropped(figures, server, target_busy)
    prompt = prompt_dependencies(server, max(PROMPT_MS, PROMPT_SHARE_OF_SLO * (slo_ms or 0.0)))
    if prompt:
        detail = (
            f"its own waiting: no core >= {SATURATED:.0%} busy (target {target_busy:.0%} of its core(s)), "
            f"{figures.engine} at {figures.generator_util:.0%} of its cores, and every dependency the lab runs "
            f"answered a probe promptly all through the step (median round trip {prompt})"
        )
        if figures.errors:
            detail += f"; {figures.errors} errors"
        if held:
            detail += f"; {figures.engine} dropped {figures.dropped} arrivals, its VUs outgrown by slow answers"
        return Bottleneck(kind=TARGET, name=TARGET, cpus=cpus, detail=detail)
    return undetermined(server, target_busy)


def _dropped(figures: LoadFigures, server: ServerSample, target_busy: float) -> Bottleneck:
    """A step whose generator dropped arrivals (its VU pool or its CPU ran out): the schedule was not kept,
    so the load was not the load asked for, and the step is the generator's, unless the evidence names
    another party (`attribute`): the target only when it was itself saturated beside a generator with
    headroom; a core outside the target's that something else filled; neighbours that crowded it.
    Throttling alone is no such evidence: a budgeted target can be throttled in most of its periods and
    still be short of its quota while k6, not it, drops the arrivals (the local-cache example's failing
    steps, issue 49)."""
    throttled = _throttled_share(server)
    quota = f", throttled in {throttled:.0%} of its quota periods" if server.throttling.get("periods") else ""
    detail = (
        f"{figures.engine} dropped {figures.dropped} arrivals (its VU pool or its CPU ran out) at "
        f"{figures.generator_util:.0%} of its cores, the target {target_busy:.0%} busy{quota}: "
        "the schedule was the generator's to keep"
    )
    return Bottleneck(kind=GENERATOR, name=figures.engine, detail=detail)


def prompt_dependencies(server: ServerSample, within_ms: float = PROMPT_MS) -> str:
    """The dependencies' median round trips, as text, when every one the lab runs was probed and answered
    within `within_ms` (median) through the step; "" when any was slow or failed, or none was probed."""
    probed = server.dependency_rtt
    if not probed:
        return ""
    for figures in probed.values():
        p50 = figures["p50_ms"]
        if figures["failed"] or figures["n"] < MIN_PROBES or p50 is None or p50 > within_ms:
            return ""
    return ", ".join(f"{name} {figures['p50_ms']:.1f} ms" for name, figures in sorted(probed.items()))


def _probes(server: ServerSample) -> str:
    """Every probed dependency's round trips, for a ceiling nobody could be named for."""
    parts = []
    for name, figures in sorted(server.dependency_rtt.items()):
        p50, slowest = figures["p50_ms"], figures["max_ms"]
        answered = f"median {p50:.1f} ms, max {slowest:.0f} ms" if p50 is not None and slowest is not None else "none"
        failed = f", {figures['failed']} failed" if figures["failed"] else ""
        parts.append(f"{name} {answered} ({figures['n']} answered{failed})")
    return f"; dependency probes: {', '.join(parts)}" if parts else ""


def outside_cores(server: ServerSample) -> tuple[float, float]:
    """The target's neighbours split in two: the cores the lab's own dependencies pinned to the target's
    cores used (under a budget they share them by design), and the rest, processes the lab did not start
    (another job on a shared machine). A role pinned to several cores counts for its share of them."""
    cpus = set(server.target_cpus)
    ours = 0.0
    for role, cores in server.roles_cores_mean.items():
        pinned = server.role_cpus.get(role) or []
        if role in GENERATORS or not pinned or not cpus & set(pinned):
            continue
        ours += cores * len(cpus & set(pinned)) / len(pinned)
    total = server.neighbour_cores_mean or 0.0
    ours = min(ours, total)
    return ours, total - ours


def _crowded(server: ServerSample, core_busy: dict[int, float], target_and_neighbours: float) -> bool:
    """Whether the target's cores were too full to give it the CPU it could use.

    Unbudgeted, the target could use its cores whole: the neighbours crowded it when they and it filled
    them. Under a CPU budget the lab places the target's dependencies on its cores on purpose, and the
    target may use only its quota: they crowd it only when the cores themselves were full. Counted against
    the budget instead, a Postgres using more CPU than a small target's quota read as more than all of the
    target's cores on a core half idle, where the target's p99 broke with its quota (the search preset:
    docs/results/2026-11-28/presets/search/).
    """
    if not server.throttling.get("periods"):
        return target_and_neighbours >= SATURATED
    busy = [core_busy.get(int(cpu), 0.0) for cpu in server.target_cpus]
    return bool(busy) and sum(busy) / len(busy) >= SATURATED


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
        return Bottleneck(kind=UNDETERMINED, name="", detail=detail + "; no other process sampled" + _probes(server))
    top = used[0][1]
    cpus = list(server.role_cpus.get(top, []))
    return Bottleneck(
        kind=UNDETERMINED,
        name=top,
        cpus=cpus,
        detail=f"{detail}, {shares}; busiest besides the target: {top}" + _probes(server),
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


def not_converged(capacity: CapacityResult) -> Bottleneck:
    """A search that did not bracket the capacity: why, and what its lowest failing step failed on."""
    detail = capacity.unconverged
    failed = [step for step in capacity.steps if not step.passed]
    if failed:
        lowest = min(failed, key=lambda step: step.rate)
        reasons = [reason for reason in lowest.reasons if not reason.startswith("unconfirmed")]
        detail += f"; at {lowest.rate:,.0f} req/s the step failed on: {'; '.join(reasons)}"
    return Bottleneck(kind=UNCONVERGED, name="", detail=detail)


def kept_up() -> Bottleneck:
    return Bottleneck(kind=NONE, name="", detail="every step kept the SLO")
