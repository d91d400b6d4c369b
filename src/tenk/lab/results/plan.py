"""`tenk lab plan`: a deployment sized from measured per-request costs.

Invariant: every figure names where it comes from. A figure is *measured* when it is read from a result
file (run folder and rung, or a bench-ingest round), and *projected* when arithmetic carries a measurement
to the asked-for rate (linear scaling of CPU, Little's law for connections) or when it rests on a stated
assumption. Nothing is printed without its basis, so a plan can be checked against the runs it came from;
a figure that has no measurement behind it says so instead of inventing one.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, Literal

import click

from tenk.ingest.schemas import MAX_BATCH
from tenk.ingest.settings import IngestSettings
from tenk.lab.definition.mixes import Mix, load_mix
from tenk.lab.documents import RungResult, load_results
from tenk.lab.errors import LabError
from tenk.lab.results.derivations import cpu_ms_per_request

Basis = Literal["measured", "projected"]

# The HPA keeps pods at this share of their CPU request: the rest absorbs a burst while new pods start.
TARGET_CPU_UTILISATION = 0.6
# Endpoint kinds whose every request holds a Postgres connection (cached reads rarely do, ingest never).
POSTGRES_KINDS = ("db", "write", "search")
# Connections a process keeps beyond the Little's-law mean, for the queueing spikes around it.
POOL_SPARE = 2
# A worker is sized to run at this share of its measured drain rate, so that it catches up after a burst.
WORKER_HEADROOM = 0.7
# Redis stream bookkeeping per entry (id, listpack fields) on top of the event's own bytes: an assumption
# from Redis' stream encoding, not a measurement.
STREAM_OVERHEAD_BYTES = 64
DEFAULT_MAX_BACKLOG: int = IngestSettings.model_fields["max_backlog"].default


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    basis: Basis
    source: str
    how: str


@dataclass
class Plan:
    rps: float
    mix: str
    p99_ms: float
    figures: list[Figure] = field(default_factory=list)
    not_measured: list[str] = field(default_factory=list)

    def add(self, name: str, value: float, unit: str, basis: Basis, source: str, how: str) -> float:
        self.figures.append(Figure(name, value, unit, basis, source, how))
        return value

    def value(self, name: str) -> float:
        return next(f.value for f in self.figures if f.name == name)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Rung:
    """A measured rung, and the run folder it was read from (to cite)."""

    run: Path
    data: RungResult

    @property
    def cite(self) -> str:
        return f"{self.run.name}, rung {self.data.index + 1} ({self.data.label})"


def load_rungs(results: Path) -> list[Rung]:
    """Every rung of every results.json under `results` (a run folder, or a folder of them)."""
    files = [results] if results.is_file() else sorted(results.rglob("results.json"))
    return [Rung(path.parent, rung) for path in files for rung in load_results(path).rungs]


def _mix_name(rung: Rung) -> str:
    return Path(str(rung.data.config.get("mix", ""))).stem


def pick_rung(rungs: list[Rung], mix: str, p99_ms: float) -> Rung:
    """The costliest qualifying rung: the mix asked for, a server figure (not generator-bound), the SLO met
    at the measured rate, the target's CPU sampled. The costliest, so that the plan errs towards room."""
    candidates = [
        rung
        for rung in rungs
        if _mix_name(rung) == mix
        and rung.data.verdict.server_figure
        and rung.data.figures.p99_ms <= p99_ms
        and cpu_ms_per_request(rung.data) is not None
    ]
    if not candidates:
        raise LabError(
            f"no rung of mix {mix!r} with p99 <= {p99_ms:g} ms and a sampled target CPU in these results: "
            f"run `tenk lab run` with that mix first"
        )
    return max(candidates, key=lambda rung: cpu_ms_per_request(rung.data) or 0.0)


def _ingest_rate(path: Path) -> tuple[float, str]:
    """One worker's drain rate: the median rows/s over the rounds of a `bench_ingest --json` file."""
    rounds = json.loads(path.read_text())
    rates = [float(r["drain"]["rows_per_s"]) for r in rounds if r.get("drain", {}).get("rows_per_s")]
    if not rates:
        raise LabError(f"{path}: no drain.rows_per_s in any round (write it with bench_ingest --json)")
    return median(rates), f"{path.name}, median of {len(rates)} rounds' drain.rows_per_s"


def _event_bytes(mix: Mix) -> int:
    bodies = [json.dumps(e.body).encode() for e in mix.endpoints if e.kind == "ingest" and e.body is not None]
    return max((len(body) for body in bodies), default=0)


def make_plan(
    rps: float, mix_name: str, p99_ms: float, results: Path, ingest: Path | None = None, max_backlog: int | None = None
) -> Plan:
    """The deployment for `rps` req/s of a mix at a p99 SLO, sized from the costliest rung in `results` that
    qualifies (`pick_rung`): the API, Postgres, the ingest workers and Redis, each figure citing its basis."""
    mix = load_mix(mix_name)
    rung = pick_rung(load_rungs(results), mix.name, p99_ms)
    plan = Plan(rps=rps, mix=mix.name, p99_ms=p99_ms)
    processes = _plan_api(plan, rung)
    _plan_postgres(plan, rung, mix, processes)
    _plan_ingest(plan, mix, ingest)
    _plan_redis(plan, mix, max_backlog)
    return plan


def _plan_api(plan: Plan, rung: Rung) -> float:
    """The API's CPU per request, cores, processes and memory; returns the processes."""
    rps, figures, server = plan.rps, rung.data.figures, rung.data.server
    measured_rps = figures.rps
    # API processes: CPU per request is the figure that repeats on a busy machine
    # (docs/results.md#2026-11-25-local-cache).
    cpu_ms = plan.add(
        "api_cpu_ms_per_request",
        round(cpu_ms_per_request(rung.data) or 0.0, 4),
        "CPU ms",
        "measured",
        rung.cite,
        f"target CPU {server.cpu_cores_mean} cores / {measured_rps:.0f} req/s at p99 {figures.p99_ms} ms",
    )
    cores = plan.add(
        "api_cores",
        round(rps * cpu_ms / 1000, 2),
        "cores",
        "projected",
        rung.cite,
        f"{rps:.0f} req/s x {cpu_ms} CPU ms, scaled linearly from {measured_rps:.0f} req/s",
    )
    processes = plan.add(
        "api_processes",
        max(2, math.ceil(cores / TARGET_CPU_UTILISATION)),
        "processes (1 core each)",
        "projected",
        rung.cite,
        f"{cores} cores at {TARGET_CPU_UTILISATION:.0%} of a 1-core request (the HPA target); at least 2",
    )
    workers_per_target = int(rung.data.config.get("workers", 1) or 1)
    rss = server.rss_mb_max or 0.0
    if rss:
        plan.add(
            "api_memory_request_mb",
            64 * math.ceil(rss / workers_per_target * 1.25 / 64),
            "MiB per process",
            "measured",
            rung.cite,
            f"peak RSS {rss:.0f} MB over {workers_per_target} process(es), +25 %, rounded up to 64 MiB",
        )
    else:
        plan.not_measured.append("API memory: the rung has no RSS sample")
    return processes


def _plan_postgres(plan: Plan, rung: Rung, mix: Mix, processes: float) -> None:
    """Postgres: Little's law, L = lambda x W, per endpoint that holds a connection for its whole request."""
    kinds = {e.name: e.kind for e in mix.endpoints}
    in_use = 0.0
    terms = []
    for name, measured in rung.data.figures.endpoints.items():
        if kinds.get(name) in POSTGRES_KINDS:
            arrival = plan.rps * measured.share
            hold_s = measured.p99_ms / 1000
            in_use += arrival * hold_s
            terms.append(f"{name} {arrival:.0f}/s x {measured.p99_ms} ms")
    if not terms:
        plan.not_measured.append(f"Postgres connections: the rung has no per-endpoint figures for {POSTGRES_KINDS}")
        return
    total = plan.add(
        "postgres_connections_in_use",
        round(in_use, 1),
        "connections",
        "projected",
        rung.cite,
        "Little's law over the measured per-endpoint shares and p99 latencies (an upper bound on the time "
        "a connection is held): " + "; ".join(terms),
    )
    pool = plan.add(
        "db_pool_max",
        max(4, math.ceil(total / processes) + POOL_SPARE),
        "connections per process (TENK_DATABASE_POOL_MAX)",
        "projected",
        rung.cite,
        f"{total} in use / {processes:.0f} processes, + {POOL_SPARE} spare, at least 4",
    )
    plan.add(
        "postgres_max_connections",
        processes * pool,
        "connections (pooler or Postgres)",
        "projected",
        rung.cite,
        f"{processes:.0f} processes x {pool:.0f}; add the workers' TENK_INGEST_CONNECTIONS each",
    )


def _plan_ingest(plan: Plan, mix: Mix, ingest: Path | None) -> None:
    """Ingest: events/s from the mix, drained by workers at a measured rate."""
    share = sum(e.share for e in mix.endpoints if e.kind == "ingest")
    events = plan.add(
        "ingest_events_per_s",
        round(plan.rps * share, 1),
        "events/s",
        "projected",
        f"mix {mix.name} ({mix.source.name})",
        f"{plan.rps:.0f} req/s x the mix's ingest share {share:.3f}",
    )
    if events and ingest is not None:
        rate, cite = _ingest_rate(ingest)
        plan.add("worker_rows_per_s", round(rate), "rows/s per worker", "measured", cite, "one worker, full backlog")
        plan.add(
            "ingest_workers",
            max(1, math.ceil(events / (rate * WORKER_HEADROOM))),
            "workers",
            "projected",
            cite,
            f"{events} events/s / ({rate:.0f} rows/s x {WORKER_HEADROOM:.0%} headroom)",
        )
    elif events:
        plan.not_measured.append(
            "ingest workers: no drain rate given (`python -m benchmarks.bench_ingest --json FILE`, then --ingest FILE)"
        )
    plan.add(
        "stream_shards",
        1,
        "streams",
        "projected",
        "tenk.ingest.keys",
        "tenk writes one stream; more workers share it through the consumer group",
    )


def _plan_redis(plan: Plan, mix: Mix, max_backlog: int | None) -> None:
    """Redis memory for the backlog: the most it may hold before POSTs answer 503."""
    event_bytes = _event_bytes(mix)
    if event_bytes:
        limit = max_backlog or DEFAULT_MAX_BACKLOG
        plan.add(
            "redis_backlog_mb",
            round(limit * (event_bytes + STREAM_OVERHEAD_BYTES) / 2**20, 1),
            "MiB",
            "projected",
            f"mix {mix.name} ({mix.source.name})",
            f"TENK_INGEST_MAX_BACKLOG {limit:,} x ({event_bytes} B body template + {STREAM_OVERHEAD_BYTES} B "
            "assumed stream overhead); the template's placeholders are filled with longer values at run time",
        )
    plan.not_measured.append(
        "Redis memory for the product cache: no run measures the bytes per cached entry; size it with "
        "`redis-cli info memory` after warming the cache"
    )


def render_text(plan: Plan) -> str:
    lines = [f"plan for {plan.rps:,.0f} req/s of mix {plan.mix!r}, p99 <= {plan.p99_ms:g} ms", ""]
    for f in plan.figures:
        lines.append(f"{f.name}: {f.value:g} {f.unit}  [{f.basis}: {f.source}]")
        lines.append(f"    {f.how}")
    if plan.not_measured:
        lines += ["", "not measured (no figure given):", *(f"- {item}" for item in plan.not_measured)]
    return "\n".join(lines)


def render_kustomize(plan: Plan) -> str:
    """Patches for deploy/k8s/base: the API's requests, the HPA's floor, the workers, the pool size."""
    names = {f.name for f in plan.figures}
    processes = int(plan.value("api_processes"))
    memory = int(plan.value("api_memory_request_mb")) if "api_memory_request_mb" in names else 256
    header = (
        f"# Written by `tenk lab plan --rps {plan.rps:g} --mix {plan.mix} --p99-ms {plan.p99_ms:g}`; "
        "see its text output for each figure's source.\n"
    )
    docs = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "tenk-api"},
            "spec": {
                "replicas": processes,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "api",
                                "resources": {
                                    "requests": {"cpu": "1", "memory": f"{memory}Mi"},
                                    "limits": {"memory": f"{memory * 2}Mi"},
                                },
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "tenk-api"},
            "spec": {
                "minReplicas": processes,
                "maxReplicas": processes * 2,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": int(TARGET_CPU_UTILISATION * 100)},
                        },
                    }
                ],
            },
        },
    ]
    if "ingest_workers" in names:
        docs.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "tenk-worker"},
                "spec": {"replicas": int(plan.value("ingest_workers"))},
            }
        )
    if "db_pool_max" in names:
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "tenk-config"},
                "data": {"TENK_DATABASE_POOL_MAX": str(int(plan.value("db_pool_max")))},
            }
        )
    return header + "---\n".join(json.dumps(doc, indent=2) + "\n" for doc in docs)


@click.command("plan")
@click.option("--rps", type=click.FloatRange(min=0, min_open=True), required=True, help="Requests/s to plan for.")
@click.option("--mix", "mix_name", default="realistic", show_default=True, help="The mix the rps is made of.")
@click.option("--p99-ms", type=click.FloatRange(min=0, min_open=True), default=50.0, show_default=True)
@click.option(
    "--results",
    type=click.Path(exists=True, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="A run folder, or a folder of them (their results.json are read).",
)
@click.option(
    "--ingest",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A `python -m benchmarks.bench_ingest --json FILE` file: one worker's measured drain rate.",
)
@click.option("--max-backlog", type=click.IntRange(min=MAX_BATCH), help="TENK_INGEST_MAX_BACKLOG, if not the default.")
@click.option("--emit", type=click.Choice(["text", "json", "kustomize"]), default="text", show_default=True)
def plan_command(
    rps: float,
    mix_name: str,
    p99_ms: float,
    results: Path,
    ingest: Path | None,
    max_backlog: int | None,
    emit: str,
) -> None:
    """Size a deployment (API processes and cores, workers, Postgres connections, Redis memory) from measured
    per-request costs; every figure cites its run and rung, and says whether it was measured or projected."""
    plan = make_plan(rps, mix_name, p99_ms, results, ingest, max_backlog)
    if emit == "json":
        click.echo(json.dumps(plan.to_json(), indent=2))
    elif emit == "kustomize":
        click.echo(render_kustomize(plan), nl=False)
    else:
        click.echo(render_text(plan))
