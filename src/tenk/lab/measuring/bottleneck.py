"""Who set a ceiling: the target, the generator, a named dependency, or the target's neighbours.

A capacity is the target's only when the target had no CPU left (its cores >= 90 % busy with its
own work). Otherwise the rate where the SLO broke says something about the machine, not the
server: Postgres and k6 sharing a saturated core, a generator out of CPU, a neighbour on the
target's core. Such a rung is reported as "≥ X req/s, limited by postgres on CPU 1", and a
comparison between such rungs is invalid: it would compare the neighbours.

Input: a step's `LoadFigures` and the sampler's `ServerStats` (as JSON), plus how many cores the
target can use. Output: a `Bottleneck`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tenk.lab.driving.generator import GENERATOR_BOUND_UTIL
from tenk.lab.results.figures import LoadFigures

SATURATED = 0.90
# A role must hold at least this share of a saturated core to be named as its consumer.
MIN_CONSUMER_SHARE = 0.25
GENERATORS = ("k6", "wrk")

TARGET = "target"
GENERATOR = "generator"
DEPENDENCY = "dependency"
NEIGHBOURS = "neighbours"
UNDETERMINED = "undetermined"
NONE = "none"


@dataclass(frozen=True)
class Bottleneck:
    kind: str  # one of TARGET, GENERATOR, DEPENDENCY, NEIGHBOURS, UNDETERMINED, NONE
    name: str  # "target", "k6", "postgres", ... ("" when kind is NONE)
    cpus: list[int] = field(default_factory=list)
    detail: str = ""

    @property
    def is_target(self) -> bool:
        return self.kind == TARGET

    def phrase(self) -> str:
        if self.kind == NONE:
            return "no ceiling reached"
        if self.kind == UNDETERMINED:
            return f"undetermined ({self.detail})"
        where = f" on CPU {','.join(str(c) for c in self.cpus)}" if self.cpus else ""
        return f"{self.name}{where}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Bottleneck:
        return cls(**data)


def attribute(figures: LoadFigures, server: dict[str, Any], target_cores: float) -> Bottleneck:
    """Name the bottleneck of a step that failed (or of any step: the most loaded party wins).

    `target_cores` is what the target can use at most: its pinned CPUs, or fewer when it runs
    fewer processes than that (one event loop uses one core at most).
    """
    cpus = [int(c) for c in server.get("target_cpus", [])]
    target_busy = server.get("cpu_cores_mean", 0.0) / target_cores if target_cores else 0.0
    if target_busy >= SATURATED:
        return Bottleneck(TARGET, TARGET, cpus, f"target {target_busy:.0%} busy on its {target_cores:g} core(s)")
    if figures.generator_util > GENERATOR_BOUND_UTIL:
        return Bottleneck(
            GENERATOR, figures.engine, [], f"{figures.engine} used {figures.generator_util:.0%} of its cores"
        )
    core_busy = {int(cpu): share for cpu, share in server.get("core_busy_mean", {}).items()}
    roles: dict[str, float] = server.get("roles_cores_mean", {})
    role_cpus: dict[str, list[int]] = server.get("role_cpus", {})
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
        return Bottleneck(
            kind, top, [cpu], f"CPU {cpu} {core_busy[cpu]:.0%} busy ({shares}); target {target_busy:.0%} busy"
        )
    neighbours = server.get("neighbour_cores_mean", 0.0) / target_cores if target_cores else 0.0
    if cpus and target_busy + neighbours >= SATURATED and neighbours > 0.1:
        return Bottleneck(
            NEIGHBOURS,
            "neighbours",
            cpus,
            f"other processes held {neighbours:.0%} of the target's cores; target {target_busy:.0%} busy",
        )
    if figures.dropped > 0:
        return Bottleneck(GENERATOR, figures.engine, [], f"{figures.dropped} iterations dropped (VU ceiling)")
    return undetermined(server, target_busy)


def undetermined(server: dict[str, Any], target_busy: float) -> Bottleneck:
    """No core saturated: say who used what, and name the busiest party besides the target, so that a
    reader can tell a generator- or dependency-limited search from a target one that stalled."""
    roles: dict[str, float] = server.get("roles_cores_mean", {})
    used = sorted(((cores, role) for role, cores in roles.items() if cores > 0), reverse=True)
    shares = ", ".join(f"{role} {cores:.2f} cores" for cores, role in used)
    detail = f"no core >= {SATURATED:.0%} busy; sampled CPU: target {target_busy:.0%} of its core(s)"
    if not used:
        return Bottleneck(UNDETERMINED, "", [], detail + "; no other process sampled")
    top = used[0][1]
    cpus = list(server.get("role_cpus", {}).get(top, []))
    return Bottleneck(UNDETERMINED, top, cpus, f"{detail}, {shares}; busiest besides the target: {top}")


def ingest_behind(server: dict[str, Any], also: list[str] | None = None) -> Bottleneck:
    """The backlog grew: the writers set the ceiling. `also`: the step's other failures, if any."""
    ingest = server.get("ingest") or {}
    roles: dict[str, float] = server.get("roles_cores_mean", {})
    workers = {role: cores for role, cores in roles.items() if role.startswith("worker")}
    used = ", ".join(f"{role} {cores:.2f} cores" for role, cores in sorted(workers.items()))
    detail = (
        f"backlog grew {ingest.get('backlog_start')} -> {ingest.get('backlog_end')} while "
        f"{ingest.get('rows_landed_per_s')} rows/s landed" + (f"; {used}" if used else "")
    )
    if also:
        detail += "; the step also failed: " + "; ".join(also)
    return Bottleneck(DEPENDENCY, "ingest workers", [], detail)


def kept_up() -> Bottleneck:
    return Bottleneck(NONE, "", [], "every step kept the SLO")
