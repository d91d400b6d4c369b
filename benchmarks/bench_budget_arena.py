"""What each crud endpoint of the HttpArena entries costs, in instructions a request: tenk's entry
(`examples/httparena/tenk`) and the stock FastAPI one (`httparena/fastapi_crud`), each in its own
environment, counted by callgrind in-process through the ASGI callable (`budget/arena.py`), on a
Postgres of the run's own loaded with HttpArena's items (`bench_httparena.arena_postgres`).

Instructions, as `bench_budget.py` explains, because they do not move with the machine's load; what
they leave out is the HTTP server's work and the per-wakeup costs of a request served alone (see the
results' notes). The mix-weighted figure weights the endpoints as crud's templates do: 15 reads (a
miss each, over 50,000 ids with a 200 ms TTL), 1 list, 1 create, 3 updates in 20.

    .venv/bin/python -m benchmarks.bench_budget_arena [--rounds 1] [--entries tenk] [--endpoints get_miss]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._common import REPO, VENV_BIN
from benchmarks.bench_budget import _instructions, _marks
from benchmarks.bench_httparena import arena_postgres, entry_env
from benchmarks.budget.arena import ENDPOINTS
from benchmarks.httparena.entries import entries

COUNTS = {"get_miss": 1000, "get_hit": 2000, "list": 500, "create": 500, "update": 500}
# crud's 20 templates: 15 single-item reads, 1 list, 1 create, 3 updates.
MIX = {"get_miss": 15, "list": 1, "create": 1, "update": 3}
ENTRIES = ("tenk", "fastapi-crud")


def python_of(entry: str) -> Path:
    """tenk's entry runs in the lab's environment, the stock one in its own (made from its requirements)."""
    if entry == "tenk":
        return VENV_BIN / "python"
    stock = entries()[entry]
    stock.prepare()
    return stock.venv / "bin" / "python"


def measure(entry: str, endpoint: str, env: dict[str, str], workdir: Path) -> float:
    """Instructions a request of one endpoint of one entry, in one valgrind run."""
    dump = workdir / f"callgrind-{entry}-{endpoint}"
    for old in workdir.glob(dump.name + "*"):
        old.unlink()
    argv = [
        *("valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={dump}"),
        *(str(python_of(entry)), "-m", "benchmarks.budget.arena", entry, endpoint, str(COUNTS[endpoint])),
    ]
    done = subprocess.run(argv, env={**env, "PYTHONHASHSEED": "0"}, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{entry} {endpoint}: driver failed ({done.returncode}):\n{done.stderr[-3000:]}")
    units: float = json.loads(done.stdout.strip().splitlines()[-1])["units"]
    return _instructions(dump) / units


def weighted(figures: dict[str, float]) -> float:
    """Instructions a request of crud's mix."""
    return sum(figures[name] * weight for name, weight in MIX.items()) / sum(MIX.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--entries", nargs="*", default=list(ENTRIES), choices=ENTRIES)
    parser.add_argument("--endpoints", nargs="*", default=list(ENDPOINTS), choices=ENDPOINTS)
    parser.add_argument("--json", type=Path, help="also write the figures (medians of the rounds) here")
    parser.add_argument("--keep-dumps", type=Path, help="copy callgrind's dumps here (for callgrind_annotate)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="tenk-bench-budget-arena-"))
    runs: dict[str, dict[str, list[float]]] = {entry: {name: [] for name in args.endpoints} for entry in args.entries}
    try:
        with arena_postgres(workdir) as dsn:
            env = entry_env(dsn, workdir)
            env["TENK_CALLGRIND_MARKS"] = str(_marks(workdir))
            for number in range(1, args.rounds + 1):
                for entry in args.entries:
                    for endpoint in args.endpoints:
                        runs[entry][endpoint].append(measure(entry, endpoint, env, workdir))
                        if args.keep_dumps:
                            args.keep_dumps.mkdir(parents=True, exist_ok=True)
                            for dump in workdir.glob(f"callgrind-{entry}-{endpoint}.*"):
                                shutil.copy(dump, args.keep_dumps / f"{dump.name}.round{number}")
                        print(f"round {number}: {entry} {endpoint} {runs[entry][endpoint][-1]:,.0f}", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    figures = {entry: {name: statistics.median(values) for name, values in by.items()} for entry, by in runs.items()}
    print("| crud endpoint, instructions a request | " + " | ".join(args.entries) + " |")
    print("|---|" + "---:|" * len(args.entries))
    for endpoint in args.endpoints:
        print(f"| {endpoint} | " + " | ".join(f"{figures[e][endpoint]:,.0f}" for e in args.entries) + " |")
    if all(name in args.endpoints for name in MIX):
        print("| crud mix | " + " | ".join(f"{weighted(figures[e]):,.0f}" for e in args.entries) + " |")
    if args.json:
        args.json.write_text(json.dumps({"rounds": runs, "medians": figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
