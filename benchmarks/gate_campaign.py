"""`make gate-campaign`: how often a CI gate cries wolf, and how often it catches a real regression.

A trial runs a gate exactly as CI runs it (the same command, repeats and durations) and keeps its verdict:
- A/A: the code as it is, so a failing verdict is a false alarm;
- A/B: the same code with a CPU regression planted, of 3, 5, 10 or 20 % of what it really costs, so a
  failing verdict is a catch.

Two gates:
- `--gate budget`: `make bench-budget BENCH_ARGS="--rounds 1 --check"` (benchmarks/bench_budget.py) on
  the chosen paths. The plant is bench_budget's loop, sized once per path from the path's own measured
  instructions (`bench_budget.plant_cost`), then given to each trial as `--plant-iterations`;
- `--gate lab`: `tenk lab run` of a ladder on each side, then `tenk lab compare A B --fail-on-regression`.
  The B side of an A/B trial serves tenk through `benchmarks/gate_plant.py`, which spins for the planted
  fraction of the CPU a request of its own process costs (calibrated in that process, see there).

The trials of every setting and size are interleaved, round by round, so that a drift of the machine hits
them all alike. Every trial is appended to the campaign's JSON as it ends (verdict, measured change, wall
seconds): `--max-minutes` stops cleanly between trials, and a second run with the same `--out` resumes,
running only what the first left to do. The table it prints (and docs/results.md renders from the JSON)
gives, per setting, the false-alarm rate, the detection rate per size, each with its 95 % Wilson
interval, and the runner seconds one gate run costs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from benchmarks._common import REPO, VENV_BIN

SIZES = (0.03, 0.05, 0.10, 0.20)
Z_95 = 1.959964
LAB_LADDER = REPO / "src" / "tenk" / "lab" / "examples" / "local-cache-fixed.toml"
PLANT_TARGET = "tenk+benchmarks.gate_plant:create_app"

# What CI runs, and what this campaign recommends, per gate (`--setting NAME`). The budget gate: .ci/run.
# The lab gate is not in .ci/run: its CI setting is the example workflow's (docs/examples/lab-gate.yml).
SETTINGS: dict[str, dict[str, dict[str, Any]]] = {
    "budget": {
        "ci": {"rounds": 1},
        "recommended": {"rounds": 1},
    },
    "lab": {
        "ci": {"ladder": "local-cache-fixed", "repeats": 5, "cpu_budget": "auto"},
        # One rung (the cached read) at a fixed budget: half the runner time, and no budget probe whose
        # choice can differ between the two sides. A 5 % threshold: at the default 10 %, the interval's low
        # end must clear 1.10, which a true 10 % regression does about half the time at best.
        "recommended": {
            "ladder": "local-cache-fixed",
            "rungs": 1,
            "repeats": 5,
            "cpu_budget": "500m",
            "threshold": "5%",
        },
    },
}


# Pure: the interval, the plan, the table.


def wilson(hits: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a rate of `hits` out of `trials` (95 % by default): unlike the normal
    approximation, it stays inside [0, 1] and is not empty at 0 or n hits, where a gate's rates sit."""
    if trials == 0:
        return 0.0, 1.0
    rate = hits / trials
    centre = rate + z * z / (2 * trials)
    spread = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials))
    scale = 1 + z * z / trials
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)


@dataclass
class Trial:
    setting: str
    planted: float  # 0 for an A/A trial
    verdict: str  # "pass", "fail" (the gate's exit 1) or "error" (the gate could not run)
    delta: float | None  # the change the gate measured (B over A, or over the budget), if it said
    wall_s: float
    started: str
    load: float  # the machine's 1-minute load average as the trial began
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Campaign:
    gate: str
    settings: dict[str, dict[str, Any]]
    trials: list[Trial] = field(default_factory=list)
    calibration: dict[str, Any] = field(default_factory=dict)
    commit: str = ""
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "gate-campaign", **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Campaign:
        trials = [Trial(**trial) for trial in data["trials"]]
        return cls(
            data["gate"], data["settings"], trials, data.get("calibration", {}), data["commit"], data.get("notes", [])
        )


def load(path: Path, gate: str, settings: dict[str, dict[str, Any]], commit: str) -> Campaign:
    """The campaign in `path` to append to, or a new one. One file is one gate's, and a setting keeps the
    meaning its first trials had: appending trials of another meaning would mix two gates in one rate."""
    if not path.exists():
        return Campaign(gate, dict(settings), commit=commit)
    campaign = Campaign.from_json(json.loads(path.read_text()))
    if campaign.gate != gate:
        raise SystemExit(f"{path} holds the {campaign.gate} gate's trials, not the {gate} gate's")
    for name, values in settings.items():
        if campaign.settings.setdefault(name, values) != values:
            raise SystemExit(f"{path}: setting {name!r} was {campaign.settings[name]}, not {values}")
    if campaign.commit != commit:
        campaign.notes.append(f"resumed at {commit} (begun at {campaign.commit})")
    return campaign


def save(path: Path, campaign: Campaign) -> None:
    """Written whole to a file beside it, then renamed: a stop mid-write leaves the previous campaign."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(campaign.to_json(), indent=2) + "\n")
    partial.replace(path)


def plan(wanted: dict[tuple[str, float], int], done: Sequence[Trial]) -> list[tuple[str, float]]:
    """The trials still to run, (setting, planted), interleaved: next always comes the cell furthest behind
    its count (20 A/A run two to each A/B size's one), and each round of ties starts one place further
    along, so that no size always runs first (on a machine warming up) or last. A campaign stopped at any
    point has its cells filled alike."""
    have = Counter((trial.setting, trial.planted) for trial in done if trial.verdict != "error")
    cells = [key for key, count in wanted.items() if count > 0]
    order: list[tuple[str, float]] = []
    while open_cells := [key for key in cells if have[key] < wanted[key]]:
        shift = len(order) // len(cells)

        def behind(key: tuple[str, float], shift: int = shift) -> tuple[float, int]:
            return have[key] / wanted[key], (cells.index(key) - shift) % len(cells)

        key = min(open_cells, key=behind)
        order.append(key)
        have[key] += 1
    return order


def _rate(trials: Sequence[Trial], verdict: str) -> str:
    counted = [trial for trial in trials if trial.verdict != "error"]
    if not counted:
        return ""
    hits = sum(trial.verdict == verdict for trial in counted)
    low, high = wilson(hits, len(counted))
    return f"{hits}/{len(counted)} = {hits / len(counted):.0%} [{low:.0%}, {high:.0%}]"


def _as_measured(gate: str, planted: Sequence[Trial], same: Sequence[float]) -> str:
    """The regression the B sides really carried, median: the lab's B over its own A; the budget gate's
    count over the A/A trials' median count (each trial's change is over the budget, which both share)."""
    found = [trial.delta for trial in planted if trial.delta is not None]
    if not found or (gate == "budget" and not same):
        return ""
    median = statistics.median(found)
    return f"{median if gate == 'lab' else (1 + median) / (1 + statistics.median(same)) - 1:+.1%}"


def setting_rows(campaign: Campaign) -> list[dict[str, str]]:
    """A row a setting: its false alarms (A/A), its catches per planted size, what one gate run costs."""
    out = []
    for name in dict.fromkeys(trial.setting for trial in campaign.trials):
        trials = [trial for trial in campaign.trials if trial.setting == name]
        same = [trial for trial in trials if trial.planted == 0]
        deltas = [trial.delta for trial in same if trial.delta is not None]
        row = {
            "setting": f"{name} ({describe(campaign.settings.get(name, {}))})",
            "false alarms (A/A)": _rate(same, "fail"),
            "A/A change, median [min, max]": (
                f"{statistics.median(deltas):+.2%} [{min(deltas):+.2%}, {max(deltas):+.2%}]" if deltas else ""
            ),
        }
        for size in sorted({trial.planted for trial in trials} - {0.0}):
            planted = [trial for trial in trials if trial.planted == size]
            row[f"{size:.0%} caught"] = _rate(planted, "fail")
            row[f"{size:.0%} as measured"] = _as_measured(campaign.gate, planted, deltas)
        walls = [trial.wall_s for trial in trials if trial.verdict != "error"]
        row["runner s a gate run (median)"] = f"{statistics.median(walls):,.0f}" if walls else ""
        errors = sum(trial.verdict == "error" for trial in trials)
        row["errors"] = str(errors) if errors else ""
        out.append(row)
    return out


def describe(values: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in values.items())


def table(campaign: Campaign) -> str:
    found = setting_rows(campaign)
    if not found:
        return "(no trials)"
    columns = list(dict.fromkeys(column for row in found for column in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row.get(column, "") for column in columns) + " |" for row in found]
    return "\n".join(lines)


# The gates.


class Gate(Protocol):
    def calibrate(self, campaign: Campaign) -> None: ...

    def trial(self, setting: str, values: dict[str, Any], planted: float) -> tuple[str, float | None, dict[str, Any]]:
        """(verdict, measured change, detail) of one gate run, as CI runs it."""
        ...


def _verdict(returncode: int) -> str:
    return {0: "pass", 1: "fail"}.get(returncode, "error")


_BUDGET_ROW = re.compile(r"^\| (\S+) \| [^|]+ \| ([\d,]+) \| [^|]+ \| ([\d,]+) \| ([^|]+) \|$")


class BudgetGate:
    """`python -m benchmarks.bench_budget --rounds R --check --paths P...`, a fresh stack each run, as CI."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.iterations: dict[str, dict[str, int]] = {}  # path -> planted size -> loop iterations

    def calibrate(self, campaign: Campaign) -> None:
        from benchmarks import bench_budget

        known = campaign.calibration.get("plant", {})
        missing = [path for path in bench_budget.PATHS if path.name in self.paths and path.name not in known]
        if missing:
            stack = bench_budget.start_stack()
            try:
                for path in missing:
                    cost = bench_budget.plant_cost(path, stack.env, stack.workdir)
                    known[path.name] = asdict(cost)
            finally:
                stack.stop()
        campaign.calibration["plant"] = known
        for name in self.paths:
            cost = bench_budget.PlantCost(**known[name])
            self.iterations[name] = {f"{size:g}": cost.iterations(size) for size in SIZES}

    def argv(self, values: dict[str, Any], planted: float) -> list[str]:
        argv = [str(VENV_BIN / "python"), "-m", "benchmarks.bench_budget", "--rounds", str(values["rounds"])]
        argv += ["--check", "--paths", *self.paths]
        if planted:
            argv += [f"--plant-iterations={name}={self.iterations[name][f'{planted:g}']}" for name in self.paths]
        return argv

    def trial(self, setting: str, values: dict[str, Any], planted: float) -> tuple[str, float | None, dict[str, Any]]:
        done = subprocess.run(self.argv(values, planted), cwd=REPO, capture_output=True, text=True)
        measured = {}
        for line in done.stdout.splitlines():
            if match := _BUDGET_ROW.match(line.strip()):
                measured[match[1]] = (float(match[2].replace(",", "")), float(match[3].replace(",", "")))
        verdict = _verdict(done.returncode)
        if verdict != "error" and set(measured) != set(self.paths):
            verdict = "error"
        detail: dict[str, Any] = {"instructions": {name: count for name, (count, _) in measured.items()}}
        if verdict == "error":
            detail["stderr"] = done.stderr[-1500:]
        # The change the gate judged: the worst path's median over its budget.
        delta = max((count / budget - 1 for count, budget in measured.values()), default=None)
        return verdict, delta, detail


class LabGate:
    """`tenk lab run` of the ladder on an A side and a B side, then `tenk lab compare A B --fail-on-regression`."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def calibrate(self, campaign: Campaign) -> None:
        campaign.calibration.setdefault("plant", "in the target's process: see benchmarks/gate_plant.py")

    def ladder(self, values: dict[str, Any], planted: float, folder: Path) -> Path:
        """The ladder of a side: CI's, cut to its first `rungs`, its target planted on a B side."""
        from benchmarks.gate_plant import planted_ladder

        source = LAB_LADDER.with_name(f"{values['ladder']}.toml")
        return planted_ladder(source, folder, planted, values.get("rungs"), values.get("duration_s"))

    def side(self, values: dict[str, Any], planted: float, folder: Path) -> tuple[int, Path | None, str]:
        ladder = self.ladder(values, planted, folder)
        argv = [str(VENV_BIN / "tenk"), "lab", "run", str(ladder), "--repeats", str(values["repeats"])]
        argv += ["--cpu-budget", str(values["cpu_budget"]), "--quiet", "--results", str(folder / "results")]
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        found = sorted((folder / "results").glob("*/results.json"))
        return done.returncode, (found[-1].parent if found else None), done.stderr[-1500:]

    def trial(self, setting: str, values: dict[str, Any], planted: float) -> tuple[str, float | None, dict[str, Any]]:
        from benchmarks.gate_plant import cpu_change

        folder = Path(tempfile.mkdtemp(prefix="trial-", dir=self.workdir))
        try:
            a_code, a_dir, a_err = self.side(values, 0.0, folder / "a")
            b_code, b_dir, b_err = self.side(values, planted, folder / "b")
            if a_dir is None or b_dir is None:
                return "error", None, {"stderr": (a_err + "\n" + b_err)[-2000:], "exit": [a_code, b_code]}
            argv = [str(VENV_BIN / "tenk"), "lab", "compare", str(a_dir), str(b_dir), "--fail-on-regression"]
            argv += [str(values["threshold"])] if values.get("threshold") else []
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
            changes = cpu_change(a_dir / "results.json", b_dir / "results.json")
            detail: dict[str, Any] = {"cpu_change_by_rung": changes, "compare": done.stdout[-1500:]}
            verdict = _verdict(done.returncode)
            return verdict, max(changes.values(), default=None), detail
        finally:
            shutil.rmtree(folder, ignore_errors=True)


# Running a campaign.


# The keys a setting may give, and their types.
_KINDS: dict[str, type] = {
    "rounds": int,
    "repeats": int,
    "rungs": int,
    "duration_s": float,
    "cpu_budget": str,
    "ladder": str,
    "threshold": str,
}


def parse_setting(text: str, gate: str) -> tuple[str, dict[str, Any]]:
    """`ci`, `recommended`, or `NAME:key=value,key=value` over the CI setting's values."""
    name, _, given = text.partition(":")
    known = SETTINGS[gate]
    values = dict(known.get(name, known["ci"]))
    if not given and name not in known:
        raise SystemExit(f"--setting {text!r}: not one of {list(known)}, and no key=value to make it")
    for item in filter(None, given.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in _KINDS:
            raise SystemExit(f"--setting {text!r}: {item!r} is not key=value of one of {list(_KINDS)}")
        try:
            values[key] = _KINDS[key](value)
        except ValueError:
            raise SystemExit(f"--setting {text!r}: {key} must be a {_KINDS[key].__name__}, not {value!r}") from None
    return name, values


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True)
    return done.stdout.strip() + (" (dirty)" if dirty.stdout.strip() else "")


def run(campaign: Campaign, gate: Gate, order: list[tuple[str, float]], out: Path, max_s: float) -> Iterator[Trial]:
    """Run `order`, saving after each trial; stop before a trial that would not end inside `max_s`."""
    began = time.monotonic()
    for setting, planted in order:
        walls = [trial.wall_s for trial in campaign.trials if trial.setting == setting]
        expected = statistics.median(walls) if walls else 0.0
        if time.monotonic() - began + expected > max_s:
            campaign.notes.append(f"stopped by --max-minutes with {len(order)} trials planned")
            save(out, campaign)
            return
        started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        load_1m = os.getloadavg()[0]
        clock = time.monotonic()
        verdict, delta, detail = gate.trial(setting, campaign.settings[setting], planted)
        trial = Trial(setting, planted, verdict, delta, time.monotonic() - clock, started, load_1m, detail)
        campaign.trials.append(trial)
        save(out, campaign)
        yield trial


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gate", choices=["budget", "lab"], required=True)
    parser.add_argument("--setting", action="append", help="ci, recommended, or NAME:key=value,...")
    parser.add_argument("--trials", type=int, help="A/A and A/B trials per size alike (a smoke run: 1)")
    parser.add_argument("--aa", type=int, default=20, help="A/A trials per setting")
    parser.add_argument("--ab", type=int, default=10, help="A/B trials per setting and planted size")
    parser.add_argument("--sizes", default=",".join(f"{size:g}" for size in SIZES), help="planted fractions")
    parser.add_argument("--paths", nargs="*", default=["cached_hit"], help="the budget gate's paths")
    parser.add_argument("--max-minutes", type=float, default=600.0)
    parser.add_argument("--out", type=Path, help="default docs/results/<today>/gate-<gate>.json")
    args = parser.parse_args(argv)
    settings = dict(parse_setting(text, args.gate) for text in (args.setting or ["ci"]))
    sizes = [float(size) for size in args.sizes.split(",") if size]
    if unknown := [size for size in sizes if size not in SIZES]:
        raise SystemExit(f"--sizes: {unknown} not among the calibrated sizes {SIZES}")
    aa, ab = (args.trials, args.trials) if args.trials is not None else (args.aa, args.ab)
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    out = args.out or REPO / "docs" / "results" / today / f"gate-{args.gate}.json"
    campaign = load(out, args.gate, settings, commit())
    wanted = {(name, 0.0): aa for name in settings} | {(name, size): ab for name in settings for size in sizes}
    with tempfile.TemporaryDirectory(prefix="tenk-gate-campaign-") as workdir:
        gate: Gate = BudgetGate(args.paths) if args.gate == "budget" else LabGate(Path(workdir))
        gate.calibrate(campaign)
        save(out, campaign)
        order = plan(wanted, campaign.trials)
        print(f"{len(order)} trials to run into {out}", file=sys.stderr, flush=True)
        for number, trial in enumerate(run(campaign, gate, order, out, 60 * args.max_minutes), 1):
            change = "" if trial.delta is None else f", measured {trial.delta:+.2%}"
            print(
                f"{number}/{len(order)} {trial.setting} planted {trial.planted:.0%}: {trial.verdict}{change}"
                f" ({trial.wall_s:.0f} s, load {trial.load:.1f})",
                file=sys.stderr,
                flush=True,
            )
    print(table(campaign))


if __name__ == "__main__":
    main()
