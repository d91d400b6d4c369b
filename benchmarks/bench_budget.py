"""`make bench-budget`: what each hot path costs, in instructions per request (or per event, per row),
against the budgets checked in beside it (`budget/budgets.json`); `--check` fails on a path over its
budget by more than the margin.

Why instructions: wall-clock figures on this shared 2-core machine swing by tens of percent from one day
to the next, and CPU time per request by 10-30 % from one run to the next, so a 25 % regression hides in
either. callgrind counts the instructions the process executed: the same code on the same data gives the
same count within a fraction of a percent, whatever else the machine runs. The count covers the app's
own work, in-process through its ASGI callable, its Redis and Postgres clients included; the servers'
own work (Postgres, Redis) and the HTTP server's are not in it (see `budget/driver.py`).

Everything runs on a stack of its own (embedded Postgres and Redis on free ports, seeded small).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from redis import Redis

from benchmarks._common import REPO, VENV_BIN, bench_env
from benchmarks.budget.driver import BENCH_KEY
from tenk.stack import EmbeddedPostgres, EmbeddedRedis, free_port
from tenk.stack.migrate import migrate
from tenk.stack.seed import seed

HERE = Path(__file__).resolve().parent / "budget"
BUDGETS = HERE / "budgets.json"
# A path fails the gate when it costs more than its budget by this much. Across rounds the counts moved
# by at most 0.6 % (see the README's budget table); 5 % leaves room for a Python patch release or a
# library's, and still catches a regression of 10 % or more.
MARGIN = 0.05
PRODUCTS, TASKS = 2_000, 300


@dataclass(frozen=True)
class HotPath:
    name: str
    count: int
    settings: dict[str, str]
    what: str


PATHS = [
    # The per-process entries live 5 s by default; under callgrind on a loaded machine 2,000 hits take
    # longer, and the expired ones were counted as Redis reads (123k instructions a hit against 81k quiet).
    HotPath("cached_hit", 2000, {"TENK_CATALOG_LOCAL_TTL_S": "3600"}, "GET /products/{id} from the per-process cache"),
    HotPath("redis_hit", 1000, {"TENK_CATALOG_LOCAL_CACHE": "false"}, "GET /products/{id} from Redis"),
    HotPath(
        "uncached",
        1000,
        {"TENK_CATALOG_LOCAL_CACHE": "false", "TENK_CATALOG_REDIS_CACHE": "false"},
        "GET /products/{id} from Postgres, both caches off",
    ),
    HotPath("ping", 2000, {}, "GET /ping"),
    HotPath("tasks_page", 500, {}, "GET /tasks?limit=20"),
    HotPath("task_create", 500, {}, "POST /tasks (201)"),
    HotPath("search", 300, {"TENK_SEARCH_CACHE": "false"}, "GET /search?q=<one word>, result cache off"),
    HotPath("event", 1000, {}, "POST /events, one event (202)"),
    HotPath("batch_event", 20, {}, "POST /events/batch of 500, per event"),
    HotPath(
        "worker_row",
        20_000,
        # Its upkeep (trims, claims, counter resets) runs on timers, whose count grows with the run's wall
        # time: once an hour here, so that the figure is the drain's own.
        {
            "TENK_INGEST_FLUSH_MS": "20",
            "TENK_INGEST_TRIM_EVERY_MS": "3600000",
            "TENK_INGEST_CLAIM_EVERY_MS": "3600000",
            "TENK_INGEST_RECONCILE_EVERY_MS": "3600000",
        },
        "one worker draining the stream, per row",
    ),
]


def _marks(workdir: Path) -> Path:
    library = workdir / "callgrind_marks.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(HERE / "callgrind_marks.c")], check=True)
    return library


def _instructions(dump_prefix: Path) -> int:
    """The instructions of the dump the driver asked for (the only one triggered by a client request)."""
    for dump in sorted(dump_prefix.parent.glob(dump_prefix.name + ".*")):
        text = dump.read_text(errors="replace")
        if "Client Request: tenk-measured" in text:
            match = re.search(r"^summary: (\d+)$", text, re.MULTILINE)
            if match:
                return int(match.group(1))
    raise RuntimeError(f"no measured dump beside {dump_prefix}")


def measure(path: HotPath, env: dict[str, str], workdir: Path, plant_iterations: int = 0) -> float:
    """Instructions per unit (request, event or row) of one path, in one valgrind run."""
    dump = workdir / f"callgrind-{path.name}"
    for old in workdir.glob(dump.name + "*"):
        old.unlink()
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={dump}",
        str(VENV_BIN / "python"),
        "-m",
        "benchmarks.budget.driver",
        path.name,
        str(path.count),
        "--plant-iterations",
        str(plant_iterations),
    ]
    # A fixed hash seed: set and dict orders, and so the instructions, are the same in every run.
    run_env = {**env, **path.settings, "PYTHONHASHSEED": "0"}
    done = subprocess.run(argv, env=run_env, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{path.name}: driver failed ({done.returncode}):\n{done.stderr[-3000:]}")
    units: float = json.loads(done.stdout.strip().splitlines()[-1])["units"]
    return _instructions(dump) / units


# The planted loop is measured at two sizes that bracket the ones planted (3-20 % of a path's cost).
_FEW, _MANY = 50, 2000


@dataclass(frozen=True)
class PlantCost:
    """What one path costs per unit as it is, and what the planted loop adds to it: a fixed part (entering
    the loop) and a part an iteration."""

    base: float
    per_iteration: float
    fixed: float = 0.0

    def iterations(self, fraction: float) -> int:
        """Iterations that make the path cost `fraction` more than it does: of its measured cost, not of its
        budget, so that a planted 5 % is 5 % of what the code really costs however far it sits from the budget."""
        wanted = fraction * self.base - self.fixed
        if wanted <= 0:
            raise ValueError(f"a plant of {fraction:.1%} is less than the loop's fixed cost ({self.fixed:,.0f})")
        return round(wanted / self.per_iteration)


def plant_cost(path: HotPath, env: dict[str, str], workdir: Path) -> PlantCost:
    """Measured on the path itself (without the loop, and with it at two sizes), where it runs; each per
    unit (request, event or row), so that the ratio holds for a batch too."""
    base = measure(path, env, workdir)
    few, many = measure(path, env, workdir, _FEW), measure(path, env, workdir, _MANY)
    per_iteration = (many - few) / (_MANY - _FEW)
    return PlantCost(base, per_iteration, few - base - _FEW * per_iteration)


@dataclass
class Stack:
    workdir: Path
    pg: EmbeddedPostgres
    redis: EmbeddedRedis
    env: dict[str, str]

    def reset_redis(self) -> None:
        client = Redis.from_url(self.redis.url)
        try:
            client.flushall()
        finally:
            client.close()

    def stop(self) -> None:
        self.redis.stop()
        self.pg.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_stack() -> Stack:
    workdir = Path(tempfile.mkdtemp(prefix="tenk-bench-budget-", dir="/tmp"))
    pg = EmbeddedPostgres(workdir / "postgres", free_port())
    redis = EmbeddedRedis(workdir / "redis", free_port())
    pg.start()
    redis.start()
    asyncio.run(migrate(pg.url))
    asyncio.run(seed(pg.url, PRODUCTS, TASKS))
    env = bench_env("bench-budget", BENCH_KEY, pg.url, redis.url, workdir, {})
    env["TENK_CALLGRIND_MARKS"] = str(_marks(workdir))
    return Stack(workdir, pg, redis, env)


def measure_all(
    stack: Stack, paths: list[HotPath], rounds: int, plant: dict[str, float], iterations: dict[str, int]
) -> dict[str, list[float]]:
    """`plant`: fractions to size by measurement; `iterations`: loops already sized (gate_campaign's)."""
    figures: dict[str, list[float]] = {path.name: [] for path in paths}
    planted = dict(iterations)
    for path in paths:
        if path.name in plant:
            planted[path.name] = plant_cost(path, stack.env, stack.workdir).iterations(plant[path.name])
    for number in range(1, rounds + 1):
        for path in paths:
            stack.reset_redis()
            figures[path.name].append(measure(path, stack.env, stack.workdir, planted.get(path.name, 0)))
            print(f"round {number}: {path.name} {figures[path.name][-1]:,.0f}", file=sys.stderr, flush=True)
    return figures


def load_budgets() -> dict[str, float]:
    return {name: float(entry["instructions"]) for name, entry in json.loads(BUDGETS.read_text()).items()}


def verdicts(figures: dict[str, list[float]], budgets: dict[str, float]) -> list[tuple[str, float, float, bool]]:
    """(path, measured median, budget, within) for every measured path that has a budget."""
    out = []
    for name, runs in figures.items():
        median = statistics.median(runs)
        budget = budgets.get(name, 0.0)
        out.append((name, median, budget, bool(budget) and median <= budget * (1 + MARGIN)))
    return out


def table(figures: dict[str, list[float]], budgets: dict[str, float]) -> str:
    lines = [
        "| path | what | instructions (median) | spread (max-min)/median | budget | verdict |",
        "|---|---|---:|---:|---:|---|",
    ]
    what = {path.name: path.what for path in PATHS}
    for name, median, budget, within in verdicts(figures, budgets):
        runs = figures[name]
        spread = (max(runs) - min(runs)) / median if median else 0.0
        verdict = "within" if within else f"OVER by {median / budget - 1:.1%}" if budget else "no budget"
        lines.append(f"| {name} | {what[name]} | {median:,.0f} | {spread:.2%} | {budget:,.0f} | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paths", nargs="*", default=[path.name for path in PATHS])
    parser.add_argument("--check", action="store_true", help="exit 1 if any path is over its budget + margin")
    parser.add_argument("--write-budgets", action="store_true", help="set each budget to this run's median")
    parser.add_argument(
        "--plant", action="append", default=[], metavar="PATH=FRACTION", help="make PATH cost FRACTION more"
    )
    parser.add_argument(
        "--plant-iterations", action="append", default=[], metavar="PATH=N", help="a plant already sized"
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("gcc") is None:
        raise SystemExit("bench-budget needs valgrind and gcc (apt-get install valgrind gcc)")
    paths = [path for path in PATHS if path.name in args.paths]
    plant = {name: float(fraction) for name, fraction in (item.split("=") for item in args.plant)}
    iterations = {name: int(count) for name, count in (item.split("=") for item in args.plant_iterations)}
    stack = start_stack()
    try:
        figures = measure_all(stack, paths, args.rounds, plant, iterations)
    finally:
        stack.stop()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    if args.write_budgets:
        written = json.loads(BUDGETS.read_text())
        written.update({name: {"instructions": round(statistics.median(runs))} for name, runs in figures.items()})
        BUDGETS.write_text(json.dumps(written, indent=2) + "\n")
    budgets = load_budgets()
    print(table(figures, budgets))
    if args.check and not all(within for *_, within in verdicts(figures, budgets)):
        raise SystemExit(1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
