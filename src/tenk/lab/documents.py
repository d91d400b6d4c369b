"""The lab's data, each shape declared once: `results.json` and every rung, step, figure, server
sample, bottleneck, verdict, estimate and claim in it.

The runner builds these, `report`, `compare`, `merge` and `plan` read them by attribute. A file
makes one round trip: `Results.model_dump_json` writes it, `load_results` validates it with
`model_validate_json`, so a damaged or foreign file fails with the field named instead of an
AttributeError deep in a report.

Unknown keys are ignored (`extra="ignore"`), deliberately: a results.json written by a newer tenk,
with a field this one does not know, still loads for `compare` against an older baseline, which
is what results files are kept for. Typos are caught where they are made instead: every document
is built with keyword constructors that mypy checks (pydantic's plugin), and a missing required
field still fails the load. Fields added since the first files were written have defaults, so
those files load too.

The maps a step records beside its figures (the mock upstream's counters, the ingest figures,
provenance, the rung's config) are TypedDicts, not models: on disk they are the plain objects they
always were, an unmeasured one is `{}`, and readers tell measured from not with `.get`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

# pydantic validates a TypedDict only from typing_extensions before Python 3.12 (pydantic depends on it).
from typing_extensions import TypedDict

from tenk.lab.errors import LabError, MalformedFileError


class Document(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Estimate(Document):
    """A figure measured several times: its median and a 95 % bootstrap interval of that median."""

    model_config = ConfigDict(frozen=True)

    median: float
    low: float
    high: float
    values: tuple[float, ...]

    def show(self, digits: int = 0) -> str:
        if len(self.values) < 2:
            return f"{self.median:,.{digits}f}"
        return f"{self.median:,.{digits}f} [{self.low:,.{digits}f}–{self.high:,.{digits}f}]"


class EndpointFigures(Document):
    requests: int
    share: float
    expected_share: float
    p50_ms: float
    p99_ms: float
    error_rate: float
    mean_ms: float = 0.0
    # The mean latency at which this endpoint's requests in flight (its rate times its mean latency, by
    # Little's law) fill the VUs k6 started with: the endpoint's pre-allocated VUs over its rate. Slower,
    # k6 had to start VUs mid-run and dropped arrivals while it did, the answers' slowness and not k6's
    # (tenk.lab.measuring.bottleneck). 0: not known.
    vu_pool_ms: float = 0.0

    @property
    def outgrew_its_vus(self) -> bool:
        return 0 < self.vu_pool_ms <= self.mean_ms


class Second(Document):
    """One second of a fixed-rate run, as the live view showed it (`tenk.lab.driving.live`)."""

    t: int  # unix second
    offered_rps: float
    goodput_rps: float
    errors: int
    p99_ms: float


class LoadFigures(Document):
    """What one load run measured, in the engine-independent shape every report and merge reads."""

    engine: str  # "k6" (open loop) or "wrk" (closed loop)
    offered_rps: float  # the arrival rate asked for; 0 for closed-loop runs
    duration_s: float
    requests: int
    rps: float  # goodput: only requests answered with an expected status count
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    # The average latency and the bytes received a second: what the search study (002) compared, from wrk.
    mean_ms: float | None = None
    bytes_per_s: float | None = None
    errors: int
    error_rate: float
    dropped: int
    # Arrivals k6 started that had no answer when it stopped (the step, then its 5 s grace): neither a
    # request nor a drop in its summary, so without this count a stalled target looked like a light load.
    unanswered: int = 0
    generator_cpu_s: float
    generator_cores_used: float
    generator_util: float
    generator_cores: int
    generator_bound: bool
    generator_reasons: list[str] = Field(default_factory=list)
    # The generator's peak RSS (its process tree; 0 in results from before it was recorded), and what
    # the lab set of its runtime for this run (k6: its Go collector and CSV flush; see
    # tenk.lab.driving.k6.generator_defaults): k6's memory grows with the run by design.
    generator_peak_rss_mb: float = 0.0
    generator_settings: dict[str, str] = Field(default_factory=dict)
    endpoints: dict[str, EndpointFigures] = Field(default_factory=dict)
    segment: str = ""
    # Failed requests by reason: "status_503", "timeout", "refused", "reset", "network", ...
    errors_by_reason: dict[str, int] = Field(default_factory=dict)
    # Every request's latency as an encoded HdrHistogram (fixed-rate runs; see tenk.lab.driving.latency).
    latency_hdr: str = ""
    # Fixed-rate runs: each second's offered rate, goodput, errors and p99 (the live view's figures).
    seconds: list[Second] = Field(default_factory=list)
    # After a merge: how the percentiles were obtained, and the segments' extremes.
    percentiles: str = ""
    p50_bounds_ms: list[float] = Field(default_factory=list)
    p95_bounds_ms: list[float] = Field(default_factory=list)
    p99_bounds_ms: list[float] = Field(default_factory=list)


class SeriesPoint(TypedDict):
    """One sample of the target's process tree: when (seconds into the step), cores busy, RSS."""

    t_s: float
    cpu_cores: float
    rss_mb: float
    neighbour_cores: NotRequired[float]  # absent from files written before neighbours were sampled


class UpstreamStats(TypedDict, total=False):
    """The mock upstream's counters at a step's end (`measuring.state.upstream_snapshot`): all four,
    each None if the mock did not report it, or none when the step had no mock upstream."""

    requests: int | None
    in_flight: int | None
    max_in_flight: int | None
    client_gone: int | None


class GaugeFigures(TypedDict):
    """A /metrics gauge polled through a step (`measuring.sampling.GaugeWatcher`): last value, peak."""

    last: float
    max: float


class ProbeFigures(TypedDict):
    """One dependency's round trips through a step (`measuring.dependency_probe`): how many answered,
    how many failed (or could not be opened before the load), the median and the slowest."""

    n: int
    failed: int
    p50_ms: float | None  # None when none answered
    max_ms: float | None


class IngestFigures(TypedDict, total=False):
    """What a step landed (`measuring.state.ingest_figures`): rows and their lag from Postgres, for
    any target; the backlog at both ends only from tenk. Empty when the mix does not ingest."""

    rows_landed: int
    lag_p50_ms: float | None  # None when no row landed
    lag_p99_ms: float | None
    rows_landed_per_s: float
    backlog_start: int
    backlog_end: int
    backlog_growth: int
    backlog_grew: bool


# The roles a load generator is sampled under, by its process name: in `ServerSample.roles_cores_mean`
# beside the target's dependencies, and named as a bottleneck's `name` when it ran out of CPU.
GENERATORS = ("k6", "wrk")


class ServerSample(Document):
    """The target's process tree sampled each second during a step, and what else was read beside it.

    Every figure is None (absent from older files) when the target was not sampled: a generator-only
    machine, or a step too short for one sample.
    """

    cpu_cores_mean: float | None = None  # CPU seconds per second, summed over the tree: 1.0 = one core busy
    cpu_cores_max: float | None = None
    rss_mb_max: float | None = None
    rss_mb_last: float | None = None
    processes: int = 0
    # Busy cores on the target's CPU set that were not the target: other tenants of those cores.
    neighbour_cores_mean: float | None = None
    target_cpus: list[int] = Field(default_factory=list)
    # Every other process the lab started or knows (generator, postgres, redis, mock-upstream,
    # workers): mean cores busy, and the CPUs each may run on.
    roles_cores_mean: dict[str, float] = Field(default_factory=dict)
    # `topology = "cluster"`: each API node's mean cores by node name; `cpu_cores_mean` is their sum.
    node_cores_mean: dict[str, float] = Field(default_factory=dict)
    role_cpus: dict[str, list[int]] = Field(default_factory=dict)
    # Each core's busy share (0..1), whoever kept it busy.
    core_busy_mean: dict[str, float] = Field(default_factory=dict)
    series: list[SeriesPoint] = Field(default_factory=list)
    # The mock upstream's counters, the target's polled gauges and the ingest figures, when measured.
    upstream: UpstreamStats = Field(default_factory=lambda: UpstreamStats())
    gauges: dict[str, GaugeFigures] = Field(default_factory=dict)
    ingest: IngestFigures = Field(default_factory=lambda: IngestFigures())
    # The target's CPU quota during the step (cpu.stat's differences): periods, throttled periods, and
    # the time its processes waited for the next period. Empty without a budget.
    throttling: dict[str, float] = Field(default_factory=dict)
    # Round trips to each dependency the lab runs, by role: whether one of them queued while the SLO broke.
    dependency_rtt: dict[str, ProbeFigures] = Field(default_factory=dict)

    @property
    def sampled(self) -> bool:
        return self.cpu_cores_mean is not None or bool(self.upstream or self.gauges or self.ingest)


# What kind of party set a ceiling.
TARGET = "target"
GENERATOR = "generator"
DEPENDENCY = "dependency"
NEIGHBOURS = "neighbours"
UNDETERMINED = "undetermined"
# A capacity search that did not bracket the capacity: its figure is a lower bound, nobody's ceiling.
UNCONVERGED = "unconverged"
NONE = "none"


class Bottleneck(Document):
    model_config = ConfigDict(frozen=True)

    kind: str  # one of TARGET, GENERATOR, DEPENDENCY, NEIGHBOURS, UNDETERMINED, UNCONVERGED, NONE
    name: str  # "target", "k6", "postgres", ... ("" when kind is NONE)
    cpus: list[int] = Field(default_factory=list)
    detail: str = ""

    @property
    def is_target(self) -> bool:
        return self.kind == TARGET

    def phrase(self) -> str:
        if self.kind == NONE:
            return "no ceiling reached"
        if self.kind == UNDETERMINED:
            return f"undetermined ({self.detail})"
        if self.kind == UNCONVERGED:
            return "search did not converge"
        where = f" on CPU {','.join(str(c) for c in self.cpus)}" if self.cpus else ""
        return f"{self.name}{where}"


class Step(Document):
    """One step of a capacity search: the rate offered, what it measured, and whether it passed."""

    rate: float
    passed: bool
    reasons: list[str]
    figures: LoadFigures
    server: ServerSample = Field(default_factory=ServerSample)


class CapacityResult(Document):
    capacity: float  # highest passing rate; 0 when no step passed
    # Whether the search bracketed the capacity to its precision (or found no rate it could pass); when it
    # did not, `stopped` says why, and the capacity is a lower bound, nobody's ceiling.
    converged: bool
    limited_by: list[str]  # why the lowest failing step failed
    generator_limited: bool  # the ceiling was the generator's: capacity is a lower bound
    plan: str
    elapsed_s: float
    steps: list[Step] = Field(default_factory=list)
    stopped: str = ""
    # Where the search left the capacity, converged or not: the last pass and the lowest confirmed failure,
    # how far apart, for what precision (the precision reached, beside the one asked). "" in older files.
    reached: str = ""

    @property
    def unconverged(self) -> str:
        """Why the search did not converge, "" when it did (files from before `stopped` give the old reason)."""
        if self.converged:
            return ""
        return self.stopped or "the search ran out of steps"

    @property
    def best(self) -> Step | None:
        passing = [step for step in self.steps if step.passed and step.rate == self.capacity]
        return passing[-1] if passing else None


class Verdict(Document):
    server_figure: bool
    generator_bound: bool
    slo_met: bool
    notes: list[str]
    ceiling: str = ""


class Metrics(Document):
    """The target's /metrics: counters' change over the rung, and gauges at its end."""

    scraped: bool
    delta: dict[str, float]
    gauges: dict[str, float] = Field(default_factory=dict)


class RungSettings(TypedDict, total=False):
    """A rung's config as results.json records it: `definition.ladder.RungConfig`'s fields (a test
    keeps the two equal). Every key is optional: a result made from a bare k6 summary records only
    mix, rate, duration_s and slo_p99_ms, and older files lack the fields added since."""

    target: str
    factory: bool
    server: str
    command: list[str]
    workers: int
    apis: int
    loop: str
    http: str
    access_log: bool
    cpus: str
    cpu_budget: str
    ingest_workers: int
    pass_if_backlog_stable: bool
    redis_io_threads: int
    mix: str
    rate: float
    capacity: bool
    slo_p99_ms: float
    duration_s: float
    warmup_s: float
    engine: str
    connections: int
    step_s: float
    capacity_budget_s: float
    start_rate: float
    max_rate: float
    env: dict[str, str]
    upstream: dict[str, float]


class BudgetRecord(Document):
    """The CPU budget a rung's target ran under: what was asked, and how (or why not) it was enforced."""

    asked: str  # as the ladder (or `auto`) resolved it: "500m", "none"
    millicores: int | None = None  # enforced; None without a quota
    period_us: int | None = None
    mechanism: str = ""
    # Why no quota was set although one was asked (no controller, not root): the verdicts say so.
    missing: str = ""
    # A budget chosen by `auto`: the rule's figures, for the reader.
    auto: str = ""


class FunctionShare(Document):
    """One function's share of a rung's stack samples: where it was the frame running (`self_share`) and
    where it was anywhere on the stack (`total_share`), each a fraction of the rung's samples."""

    function: str
    self_share: float
    total_share: float


class FunctionChange(Document):
    """One function's self share in a rung against the rung before it, and the change in points."""

    function: str
    before: float
    after: float
    points: float  # (after - before) * 100
    # Two standard errors of that change from sampling alone (binomial, both sides), in points: a change
    # within it is what two profiles of the same code could differ by.
    noise_points: float = 0.0


class RungProfile(Document):
    """Where the target's CPU went during a rung's measured steps (`tenk lab run --profile`): py-spy's
    samples of the whole process tree, merged over the steps and repeats.

    Each repeat's document names its raw stack files (`stacks`, relative to the run's folder); the rung's
    summary adds the counts, the top functions and the flame graphs written next to the report."""

    rate_hz: int
    stacks: list[str] = Field(default_factory=list)
    # Why there is no profile (py-spy missing, or it could not attach: ptrace), or "".
    missing: str = ""
    samples: int = 0
    # py-spy's own CPU seconds and the seconds it sampled for: its cost on the generator's cores.
    sampler_cpu_s: float = 0.0
    sampled_s: float = 0.0
    top: list[FunctionShare] = Field(default_factory=list)
    flame: str = ""  # profiles/rung-NN.svg
    # Against the rung before it: its differential flame graph and the functions whose share moved most.
    against: str = ""
    diff: str = ""
    changed: list[FunctionChange] = Field(default_factory=list)


class RungResult(Document):
    """One rung: one repeat's measurement, or (with `repeats`) the median repeat with every repeat beside it."""

    index: int
    label: str
    changed: str
    changes: list[str]
    multi_variable: bool
    allow_multi: bool = False
    config: RungSettings
    mode: Literal["capacity", "rate"]
    value: float
    figures: LoadFigures
    server: ServerSample = Field(default_factory=ServerSample)
    capacity: CapacityResult | None = None
    metrics: Metrics | None = None
    # The generator's own end-of-run summary (k6's, or wrk's script's), kept verbatim for a person to
    # dig into: open, because its shape is the generator's and changes with its version. tenk reads
    # its figures from the summary file when the run ends, checked (`driving.summary`), never from here.
    k6_summary: dict[str, JsonValue] | None = None
    verdict: Verdict
    elapsed_s: float | None = None
    bottleneck: Bottleneck | None = None
    cpu_ms: dict[str, float] = Field(default_factory=dict)
    # `topology = "cluster"`: CPU ms per successful request spent in each API node (cpu_ms["target"]: all).
    cpu_ms_per_node: dict[str, float] = Field(default_factory=dict)
    # 1000 / the target's CPU ms per request: what a whole core would serve if CPU were all a request took.
    # A projection, never measured, and named and shown as one in every output.
    projected_rps_per_core: float | None = None
    cpu_budget: BudgetRecord | None = None
    # One repeat's document carries its number and what was reset before it;
    repeat: int | None = None
    reset: list[str] = Field(default_factory=list)
    # a rung's summary carries every repeat and the median with its interval.
    repeats: list[RungResult] = Field(default_factory=list)
    estimate: Estimate | None = None
    cpu_ms_estimate: Estimate | None = None
    bottlenecks: list[str] = Field(default_factory=list)
    profile: RungProfile | None = None


# The labels of a comparison, decided once (`tenk.lab.results.stats.compare`) and printed as they are in
# every output: report.md, report.html, results.json, the live view and `tenk lab compare`.
BETTER = "better"
WORSE = "worse"
NO_CHANGE = "no detectable change"
INCONCLUSIVE = "inconclusive"


class RankTest(Document):
    """A two-sided Mann-Whitney U test of NEW against BASE (`tenk.lab.results.stats.mann_whitney`)."""

    model_config = ConfigDict(frozen=True)

    u: float  # pairs where NEW > BASE, ties counting a half
    p: float
    effect: float  # P(new > base) = u / (n_new * n_base); 0.5 is no effect
    min_p: float  # the smallest p these sample sizes can give
    exact: bool


class Comparison(Document):
    """NEW against BASE: the ratio of their medians (new / base), its 95 % interval, and the one label.

    `ratio` is None when the two figures are not comparable (a ceiling that is not the target's, a search
    that did not converge, a capacity against a fixed rate's goodput), and the interval is None from one
    repeat a side: there is no spread to draw one from. `reason` says why a comparison is inconclusive.
    """

    model_config = ConfigDict(frozen=True)

    label: str  # BETTER, WORSE, NO_CHANGE or INCONCLUSIVE
    reason: str = ""
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    n_base: int = 0
    n_new: int = 0
    rank_test: RankTest | None = None

    @property
    def shown(self) -> str:
        """The label as every output prints it: `better`, `inconclusive (n = 1 + 1: ...)`."""
        return f"{self.label} ({self.reason})" if self.reason else self.label


class Judgement(Document):
    """One comparison of a results document, as every output shows it (`results.derivations.judgements`):
    a rung against the rung before it, or a claim's two rungs."""

    model_config = ConfigDict(frozen=True)

    base: str  # rung labels
    new: str
    metric: str  # what `comparison` compares: capacity, rps, cpu_ms, p99_ms, errors
    comparison: Comparison
    # A step along the ladder: the target's CPU ms per request beside its headline, valid whatever set a ceiling.
    cpu: Comparison | None = None
    # A claim: its text, and what the comparison makes of it (reproduced, refuted, inconclusive (...)).
    claim: str = ""
    verdict: str = ""


class Claim(Document):
    """A published claim about two rungs, checked against what they measured."""

    model_config = ConfigDict(frozen=True)

    text: str
    source: str
    from_rung: str
    to_rung: str
    metric: str
    # None for a qualitative claim: it states `expect` instead of a ratio.
    claimed_ratio: float | None
    # Inequalities between the two rungs' quantities (see `expectations`); all must hold.
    expect: tuple[str, ...] = ()


class Machine(TypedDict):
    cpu_model: str
    cores: int | None  # psutil's count: None where the platform does not say
    memory_gb: float
    kernel: str
    hostname: str


class Software(TypedDict):
    python: str
    implementation: str
    packages: dict[str, str]  # the installed ones of `provenance.PACKAGES`, with their versions
    k6: str  # `k6 version`'s first line; "" without k6
    git_sha: str  # "" outside a git checkout
    git_dirty: bool


class Pinning(TypedDict, total=False):
    target_cpus: str
    # With a CPU budget: the target's quota as asked, and where its dependencies and the generator ran.
    cpu_budget: str
    dependency_cpus: str
    generator_cpus: str


class BudgetProvenance(TypedDict, total=False):
    """How the run budgeted its targets' CPU: the quota period, the mechanism, and `auto`'s choice."""

    period_us: int
    mechanism: str
    default: str
    auto: str


class Provenance(TypedDict, total=False):
    """Where a result came from (`results.provenance.provenance`): all four, or none in a result
    made before tenk recorded it or read from a bare k6 summary."""

    machine: Machine
    software: Software
    pinning: dict[str, Pinning]  # by rung label
    env: dict[str, str]  # the TENK_ settings, keys and URLs left out
    cpu_budget: BudgetProvenance


class Results(Document):
    """A results.json: a ladder's rungs, the claims it checks, and where and when it ran."""

    ladder: str
    description: str = ""
    source: str = ""
    created: str
    segment: str = ""
    repeats: int | None = None
    elapsed_s: float | None = None
    time_bound_s: float | None = None
    provenance: Provenance = Field(default_factory=lambda: Provenance())
    claims: list[Claim]
    rungs: list[RungResult]
    merged_from: list[str] = Field(default_factory=list)
    merge_note: str = ""
    # Every comparison the reports print, each with its label: computed once as the results are written.
    comparisons: list[Judgement] = Field(default_factory=list)
    # Set when the run stopped early (Ctrl-C, a crash): what it says, and the results hold only the
    # repeats that finished.
    partial: str = ""


def load_results(folder: Path) -> Results:
    """A results.json (or the folder holding one), checked against `Results` before anything reads it."""
    path = folder / "results.json" if folder.is_dir() else folder
    try:
        return Results.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise LabError(f"{path}: not a lab results.json ({exc})") from None
    except ValidationError as exc:
        raise MalformedFileError(path, "a lab results.json", exc) from None
