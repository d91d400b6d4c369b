"""`make bench-httparena`: tenk's HttpArena entry beside HttpArena's Python entries, in one run, on this machine.

Four profiles, each HttpArena's request templates rotated as its generator rotates them
(`benchmarks/httparena/profiles.py`): api-4 and json and async-db alone, with tenk's entry, HttpArena's
fastapi, raw uvicorn and fastpysgi-asgi entries; crud, with tenk's entry and a stock FastAPI entry
(`benchmarks/httparena/fastapi_crud`). Every entry is first held to HttpArena's validation checks for the
profile (`benchmarks/httparena/validation.py`); one that fails is reported and not measured.

Each profile is two lab ladders (`tenk lab run`), a rung an entry, run in the same process on one
Postgres loaded with HttpArena's `items`:

1. capacity: the highest open-loop rate with p99 under 100 ms, each entry on CPU 0 under the same CPU
   budget (the lab's cgroup quota; `auto` chooses it from the entries' own costs), Postgres moved onto
   CPU 0 beside it, k6 alone on CPU 1;
2. CPU a request: each entry at one fixed rate, half the lowest capacity of phase 1, same budget.

Both ladders run their rungs in 3 interleaved rounds (`--repeats`) and give medians. The run's lab folders
(results.json, report.md, report.html) and `summary.md` go under `--out`; summary.md states the issue's
targets (api-4: tenk's entry at most 0.25x fastapi's CPU a request and no more than fastpysgi-asgi's;
crud: at least 2x the stock entry's capacity at no more than 0.5x its CPU a request) held or not.

`--smoke` runs every step for a few seconds, one round, to show the harness works end to end; its figures
are not measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import psutil

from benchmarks._common import REPO, bench_env
from benchmarks.httparena import validation
from benchmarks.httparena.arena import DATASET, load_items
from benchmarks.httparena.entries import Entry, entries
from benchmarks.httparena.profiles import PROFILES, mix_toml
from tenk.lab.definition.ladder import load_ladder
from tenk.lab.documents import Results, RungResult, load_results
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.progress import QuietProgress, RichProgress
from tenk.lab.results.record import run_ladder
from tenk.stack import EmbeddedPostgres, start_http_server, start_on_free_port

# HttpArena's Postgres runs with max_connections=256 and tells the entries so; the embedded one allows 300.
DATABASE_MAX_CONN = 256
# The fastapi entry mounts HttpArena's static files from here at import: its container always has them.
STATIC = Path("/data/static")
READY_PATH = "/baseline11?a=1&b=1"
# The targets: (profile, what, the rung judged, the rung it is judged against, metric, factor).
TARGETS = (
    ("api-4", "CPU a request at most 0.25x HttpArena's fastapi entry's", "tenk", "fastapi", "cpu", 0.25),
    ("api-4", "CPU a request no more than fastpysgi-asgi's", "tenk", "fastpysgi-asgi", "cpu", 1.0),
    ("crud", "capacity at least 2x the stock FastAPI entry's", "tenk", "fastapi-crud", "capacity", 2.0),
    ("crud", "CPU a request at most 0.5x the stock FastAPI entry's", "tenk", "fastapi-crud", "cpu", 0.5),
)


@dataclass(frozen=True)
class Plan:
    """How long each step runs: the real measurement, or the smoke run's few seconds."""

    repeats: int = 3
    warmup_s: float = 5
    duration_s: float = 20
    step_s: float = 5
    capacity_budget_s: float = 150
    start_rate: float = 200

    @classmethod
    def smoke(cls) -> Plan:
        return cls(repeats=1, warmup_s=1, duration_s=3, step_s=2, capacity_budget_s=6, start_rate=50)


@contextmanager
def arena_postgres(workdir: Path) -> Iterator[str]:
    """A Postgres of the run's own, with HttpArena's `benchmark` database and its items; its URL."""
    pg = start_on_free_port(lambda port: EmbeddedPostgres(workdir / "postgres", port))
    try:
        dsn = asyncio.run(_benchmark_database(pg))
        asyncio.run(load_items(dsn))
        yield dsn
    finally:
        pg.stop()


async def _benchmark_database(pg: EmbeddedPostgres) -> str:
    admin = await asyncpg.connect(pg.superuser_url)
    try:
        await admin.execute(f'CREATE DATABASE benchmark OWNER "{pg.app_role}"')
    finally:
        await admin.close()
    return pg.url_for("benchmark")


@contextmanager
def static_dir() -> Iterator[None]:
    """HttpArena's /data/static, empty, for the entry that mounts it at import; what was made here goes after."""
    made = next((path for path in (STATIC.parent, STATIC) if not path.exists()), None)
    for path in (STATIC.parent, STATIC):
        # Made or used as root: never inside a folder, or through a link, that another user controls.
        if path.is_symlink() or (path.exists() and (path.stat().st_uid != os.getuid() or path.stat().st_mode & 0o022)):
            raise SystemExit(f"{path} is a link, or not this user's alone: make {STATIC} yourself, or remove it")
    STATIC.mkdir(parents=True, exist_ok=True)
    try:
        yield
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def entry_env(dsn: str, workdir: Path) -> dict[str, str]:
    """What every entry and the lab run with: HttpArena's variables, and the lab told where Postgres is."""
    env = bench_env("httparena", "unused", dsn, "", workdir, {})
    env.pop("TENK_REDIS_URL")
    env.update({"DATABASE_URL": dsn, "DATABASE_MAX_CONN": str(DATABASE_MAX_CONN), "DATASET_PATH": str(DATASET)})
    return env


def validate(entry: Entry, profile: str, env: dict[str, str], workers: int, workdir: Path) -> list[str]:
    """HttpArena's checks of one profile, on a fresh process of the entry (as validate.sh starts a container):
    what failed."""
    command = [part.replace("{workers}", str(workers)) for part in entry.command()]
    server, base_url = start_http_server(
        f"{entry.name} (validation)",
        lambda port: [part.replace("{port}", str(port)) for part in command],
        lambda port: workdir / f"validate-{entry.name}-{profile}-{port}.log",
        health_path=READY_PATH,
        env=env,
    )
    try:
        found = validation.failures(base_url, profile)
        code = server.process.poll()
        if found and code is not None and code < 0:
            # A check that kills the server fails every check after it: say what killed it.
            found.append(f"the server was killed by signal {-code} during the checks")
        return found
    finally:
        # fastpysgi's workers outlive a SIGTERM to their parent, and keep spinning: stopped as the lab stops
        # its servers' children.
        try:
            children = psutil.Process(server.pid).children(recursive=True)
        except psutil.Error:
            children = []
        server.stop()
        for child in children:
            with suppress(psutil.Error):
                child.kill()


def _quote(text: str) -> str:
    return json.dumps(text)


def ladder_toml(
    profile: str, phase: str, chosen: list[Entry], plan: Plan, budget: str, rate: float, workers: int
) -> str:
    """A lab ladder for one phase of one profile: a rung an entry, the issue's targets as its claims."""
    capacity = phase == "capacity"
    lines = [
        f'name = "httparena-{profile}-{phase}"',
        f"description = {_quote(f'HttpArena {profile}: ' + ', '.join(e.name for e in chosen))}",
        f"repeats = {plan.repeats}",
        "[defaults]",
        f'target = "httparena:{chosen[0].name.replace("-", "_")}"',
        f'mix = "mix-{profile}.toml"',
        'cpus = "0"',
        f"cpu_budget = {_quote(budget)}",
        f"workers = {workers}",
        f"capacity = {'true' if capacity else 'false'}",
        "slo_p99_ms = 100",
        f"warmup_s = {plan.warmup_s}",
        f"duration_s = {plan.duration_s}",
        f"step_s = {plan.step_s}",
        f"capacity_budget_s = {plan.capacity_budget_s}",
        f"start_rate = {plan.start_rate}",
        f"rate = {rate:.0f}",
        f"command = {json.dumps(chosen[0].command())}",
    ]
    for index, entry in enumerate(chosen):
        lines += ["[[rung]]", f"label = {_quote(entry.name)}"]
        if index:
            target = f"httparena:{entry.name.replace('-', '_')}"
            lines += [f'target = "{target}"', f"command = {json.dumps(entry.command())}", "allow_multi = true"]
    names = {entry.name for entry in chosen}
    for target_profile, text, judged, against, metric, factor in TARGETS:
        if target_profile == profile and {judged, against} <= names and (metric == "capacity") == capacity:
            quantity = "capacity" if capacity else "cpu_ms"
            op = ">=" if capacity else "<="
            lines += [
                "[[claim]]",
                f"text = {_quote(f'{judged}: {text}')}",
                'source = "issue 47"',
                f"from_rung = {_quote(against)}",
                f"to_rung = {_quote(judged)}",
                f'metric = "{quantity}"',
                f'expect = ["to_rung.{quantity} {op} {factor:g} * from_rung.{quantity}"]',
            ]
    return "\n".join(lines) + "\n"


def run_phase(
    profile: str, phase: str, chosen: list[Entry], plan: Plan, budget: str, rate: float, args: argparse.Namespace,
    env: dict[str, str], workdir: Path,
) -> Results:  # fmt: skip
    folder = workdir / "ladders"
    folder.mkdir(exist_ok=True)
    (folder / f"mix-{profile}.toml").write_text(mix_toml(PROFILES[profile]))
    path = folder / f"{profile}-{phase}.toml"
    path.write_text(ladder_toml(profile, phase, chosen, plan, budget, rate, args.workers))
    progress = QuietProgress() if args.quiet else RichProgress()
    out = run_ladder(load_ladder(path), RunOptions(results_root=args.out, base_env=env, progress=progress))
    return load_results(out)


def measure(
    profile: str, runners: list[Entry], plan: Plan, args: argparse.Namespace, env: dict[str, str], workdir: Path
) -> tuple[dict[str, Figures], str, float]:
    """Both phases of one profile: each entry's figures, the budget they ran under, and the CPU phase's rate."""
    capacity = run_phase(profile, "capacity", runners, plan, args.cpu_budget, 100, args, env, workdir)
    chosen = [r.cpu_budget.millicores for r in capacity.rungs if r.cpu_budget and r.cpu_budget.millicores]
    budget = f"{chosen[0]}m" if chosen else "none"
    ceilings = [r.estimate.median for r in capacity.rungs if r.estimate is not None and r.estimate.median > 0]
    rate = float(args.rate or max(10.0, min(ceilings, default=20.0) / 2))
    fixed = {r.label: r for r in run_phase(profile, "cpu", runners, plan, budget, rate, args, env, workdir).rungs}
    return {r.label: Figures.of(r, fixed.get(r.label)) for r in capacity.rungs}, budget, rate


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class Figures:
    """An entry's figures in one profile: medians of the rounds."""

    capacity: float | None  # req/s at p99 < 100 ms, when the target set the ceiling
    ceiling: str  # what set it
    cpu_us: float | None  # the entry's CPU µs a request at the fixed rate
    postgres_us: float | None  # Postgres's, at the same rate
    errors: float | None  # the share of the fixed rate's requests that failed (an entry that fell over)

    @classmethod
    def of(cls, capacity: RungResult | None, fixed: RungResult | None) -> Figures:
        def per_request(rung: RungResult | None, party: str) -> float | None:
            repeats = (rung.repeats or [rung]) if rung is not None else []
            found = _median([r.cpu_ms[party] for r in repeats if party in r.cpu_ms])
            return found * 1000 if found is not None else None

        value = capacity.estimate.median if capacity is not None and capacity.estimate is not None else None
        own = capacity is not None and capacity.verdict.server_figure
        ceiling = capacity.verdict.ceiling if capacity is not None else ""
        errors = fixed.figures.error_rate if fixed is not None else None
        return cls(
            value if own else None, ceiling, per_request(fixed, "target"), per_request(fixed, "postgres"), errors
        )


def summary(
    figures: dict[str, dict[str, Figures]],
    budgets: dict[str, str],
    rates: dict[str, float],
    refused: dict[tuple[str, str], list[str]],
) -> str:
    lines = [f"# HttpArena side by side ({datetime.now(UTC):%Y-%m-%d}, `make bench-httparena`)", ""]
    for (name, profile), found in refused.items():
        if found:
            lines += [f"- {name} is not measured in {profile}: it fails HttpArena's checks ({'; '.join(found)})."]
    lines += [""] if any(refused.values()) else []
    for profile, rows in figures.items():
        lines += [
            f"## {profile}",
            "",
            f"CPU budget {budgets[profile]} on CPU 0 (Postgres beside the entry), k6 on CPU 1; "
            f"CPU a request at {rates[profile]:,.0f} req/s.",
            "",
            "| entry | capacity, req/s at p99 < 100 ms | what set it | CPU µs/req | Postgres µs/req | both | errors |",
            "|---|---:|---|---:|---:|---:|---:|",
        ]
        for name, row in rows.items():
            both = row.cpu_us + row.postgres_us if row.cpu_us is not None and row.postgres_us is not None else None
            lines.append(
                f"| {name} | {_show(row.capacity)} | {row.ceiling or '-'} | {_show(row.cpu_us)} | "
                f"{_show(row.postgres_us)} | {_show(both)} | {_percent(row.errors)} |"
            )
        lines.append("")
    lines += ["## The targets (issue 47)", ""]
    for profile, text, judged, against, metric, factor in TARGETS:
        rows = figures.get(profile, {})
        if judged not in rows or against not in rows:
            continue
        mine, theirs = (
            getattr(rows[name], "capacity" if metric == "capacity" else "cpu_us") for name in (judged, against)
        )
        if mine is None or theirs is None or theirs == 0:
            verdict = "not measured (a ceiling not the entry's, or no figure)"
        else:
            ratio = mine / theirs
            held = ratio >= factor if metric == "capacity" else ratio <= factor
            verdict = f"{ratio:.2f}x: {'held' if held else 'NOT held'}"
        lines.append(f"- {profile}, {judged}: {text}: {verdict}")
    return "\n".join(lines) + "\n"


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def _show(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--profiles", nargs="+", choices=sorted(PROFILES), default=list(PROFILES))
    parser.add_argument("--entries", nargs="+", help="only these entries (default: all)")
    parser.add_argument("--cpu-budget", default="auto", help='the entries\' CPU quota: "auto", "600m", ...')
    parser.add_argument("--workers", type=int, default=1, help="worker processes of every entry")
    parser.add_argument(
        "--rate", type=float, help="the fixed rate of the CPU phase (default: half the lowest capacity)"
    )
    parser.add_argument("--repeats", type=int, help="interleaved rounds (default 3; 1 with --smoke)")
    parser.add_argument("--smoke", action="store_true", help="a few seconds a step: the harness end to end")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--out", type=Path, help="where the lab folders and summary.md go")
    args = parser.parse_args(argv)
    plan = Plan.smoke() if args.smoke else Plan()
    if args.repeats:
        plan = Plan(args.repeats, plan.warmup_s, plan.duration_s, plan.step_s, plan.capacity_budget_s, plan.start_rate)
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout
    default_out = REPO / "results" / f"httparena-{'smoke-' if args.smoke else ''}{sha.strip() or 'nogit'}"
    args.out = (args.out or default_out).resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    known = entries()
    chosen = [known[name] for name in (args.entries or known)]
    for entry in chosen:
        entry.prepare()
    workdir = Path(tempfile.mkdtemp(prefix="httparena-", dir="/tmp"))
    figures: dict[str, dict[str, Figures]] = {}
    failed: dict[tuple[str, str], list[str]] = {}
    budgets: dict[str, str] = {}
    rates: dict[str, float] = {}
    try:
        mounts_static = any(entry.name == "fastapi" for entry in chosen)
        with static_dir() if mounts_static else nullcontext(), arena_postgres(workdir) as dsn:
            env = entry_env(dsn, workdir)
            failed = {
                (entry.name, profile): validate(entry, profile, env, args.workers, workdir)
                for entry in chosen
                for profile in args.profiles
                if profile in entry.profiles
            }
            for (name, profile), found in failed.items():
                if found:
                    print(f"{name} fails HttpArena's {profile} checks, not measured there: {found}")
            for profile in args.profiles:
                runners = [e for e in chosen if profile in e.profiles and not failed[e.name, profile]]
                if runners:
                    figures[profile], budgets[profile], rates[profile] = measure(
                        profile, runners, plan, args, env, workdir
                    )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = summary(figures, budgets, rates, failed)
    (args.out / "summary.md").write_text(text)
    print(text)
    print(f"lab folders and summary.md in {args.out}")


if __name__ == "__main__":
    main()
