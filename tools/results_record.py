"""docs/results/ as data: what each measurement's files are, and the tables of docs/results.md made from them.

A day's folder (`docs/results/2026-11-30/`) holds the files its runs wrote (a lab `results.json`, a bench's
`--json`, a transcript) and one `measured.toml` that says, run by run, what they are: the kind of
measurement, the command, the commit, when, and how the machine was. A file's figures are read from the
file itself; the TOML adds only what the file does not hold. A run with no data file (the days before they
were kept) carries its table in the TOML instead, as the notebook recorded it, marked as such.

Every file under docs/results/ belongs to exactly one run (a `.txt` or `.log` beside a `.json` of the same
name is that file's transcript; a ladder `.toml` is named as a run's input): `build` refuses a file that no
run names, a name that matches no file, and a key it does not know, so a measurement cannot be committed
without appearing on the page, nor a page row outlive its file.

Each row of the page has an anchor, `<day>-<run>-<row>`; a page quotes a row's figure with
`<!-- figure ANCHOR FIELD -->...<!-- /figure -->` (`tools.docs_pages`), which is checked against the row.
"""

from __future__ import annotations

import json
import re
import statistics
import tomllib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bench_reads import probe_ratios
from benchmarks.gate_campaign import Campaign, setting_rows
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tenk.lab.documents import Results, RungResult

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
META = "measured.toml"

# The page's sections, in order: kind -> heading.
KINDS = {
    "headline": "The headline: the realistic mix under a CPU budget",
    "reads": "Read paths",
    "search": "Search",
    "ingest": "Ingest",
    "upstream": "Slow upstreams",
    "scaling": "Past one machine",
    "presets": "The study presets",
    "lab": "The lab's method",
    "gates": "The CI gates: how often they cry wolf, how often they catch a regression",
    "packaging": "Packaging: what an install brings",
    "httparena": "HttpArena's profiles, beside its Python entries",
}


class RecordError(ValueError):
    """docs/results/ and its measured.toml files disagree; the message lists every disagreement."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PartSpec(_Spec):
    """Some of a run's files that differ from its defaults (a `before` run's command and code). A part
    takes the run's kind, command, commit and when unless it gives its own; its label, code and note are
    its own (the run's are for the run's own `files`)."""

    files: list[str]
    kind: str | None = None
    label: str | None = None
    command: str | None = None
    commit: str | None = None
    code: str | None = None  # the commit of the code measured, when not the checkout's (PYTHONPATH)
    when: str | None = None
    note: str | None = None


class RunSpec(_Spec):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    kind: str
    title: str
    command: str
    files: list[str] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list)
    label: str = ""
    commit: str = ""
    code: str = ""
    when: str = ""
    note: str = ""
    part: list[PartSpec] = Field(default_factory=list)
    # A run that kept no data file: its table as the notebook recorded it, and where that was.
    transcribed: str = ""
    columns: list[str] = Field(default_factory=list)
    rows: list[list[str]] = Field(default_factory=list)


class DaySpec(_Spec):
    run: list[RunSpec]


@dataclass(frozen=True)
class Part:
    files: tuple[Path, ...]
    kind: str
    label: str
    command: str
    commit: str
    code: str
    when: str
    note: str


@dataclass(frozen=True)
class Run:
    folder: Path  # docs/results/<day>
    spec: RunSpec
    parts: tuple[Part, ...]
    inputs: tuple[Path, ...]

    @property
    def day(self) -> str:
        return self.folder.name

    @property
    def anchor(self) -> str:
        """A transcribed run's table, and the prefix of its rows' anchors."""
        return f"{self.day}-{self.spec.id}"

    @property
    def entry(self) -> str:
        """A run's line in the list under its rows (a data file's rows are `<day>-<path>`)."""
        return f"run-{self.day}-{self.spec.id}"

    def link(self, path: Path, text: str | None = None, anchor: str = "") -> str:
        """A link to `path` from a page of the docs site, which holds docs/results/."""
        target = path.relative_to(self.folder.parent.parent).as_posix()
        return f"[{text or path.name}]({target})" + (f"{{ #{anchor} }}" if anchor else "")

    def file_anchor(self, path: Path) -> str:
        """`<day>-<the file's path in its day, without .json or /results.json>`: unique, and stable."""
        name = path.relative_to(self.folder).with_suffix("").as_posix().removesuffix("/results")
        return f"{self.day}-{_slug(name)}"


@dataclass
class Row:
    anchor: str
    fields: dict[str, str]
    path: Path | None = None  # the data file it was read from; None for a transcribed row
    target: str = ""  # that file's path from the docs site's root (docs/)
    before: bool = False  # the code measured is an older commit's, not the checkout's (a part's `code`)


@dataclass
class Table:
    kind: str
    anchor: str
    title: str
    columns: list[str]
    rows: list[Row] = field(default_factory=list)
    caption: str = ""  # a transcribed run's command, commit and source


@dataclass
class Record:
    runs: list[Run]
    tables: list[Table]
    # By kind, newest first: the runs read from data files, which the page lists with their notes.
    listed: dict[str, list[Run]] = field(default_factory=dict)

    def row(self, anchor: str) -> Row:
        for table in self.tables:
            for row in table.rows:
                if row.anchor == anchor:
                    return row
        raise KeyError(anchor)

    def data_files(self) -> set[Path]:
        return {path for run in self.runs for part in run.parts for path in part.files}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _transcript(path: Path) -> Path | None:
    for suffix in (".txt", ".log"):
        if (other := path.with_suffix(suffix)).exists() and path.suffix == ".json":
            return other
    return None


def load_runs(root: Path = RESULTS) -> list[Run]:
    """Every run of every day under `root`, oldest first, each file matched; RecordError if any disagree."""
    return _Loader(root).runs()


class _Loader:
    """Reads each day's measured.toml under `root` and matches its runs to the day's files, collecting
    every disagreement before it refuses, so that one run of the test names them all."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.errors: list[str] = []
        self.claimed: dict[Path, str] = {}  # file -> "<day>/<run id>"

    def runs(self) -> list[Run]:
        runs = [run for meta in sorted(self.root.glob(f"*/{META}")) for run in self._day(meta)]
        self._unclaimed()
        if self.errors:
            raise RecordError("docs/results/ and its measured.toml files disagree:\n  " + "\n  ".join(self.errors))
        return runs

    def _day(self, meta: Path) -> list[Run]:
        try:
            spec = DaySpec.model_validate(tomllib.loads(meta.read_text()))
        except (tomllib.TOMLDecodeError, ValidationError) as exc:
            self.errors.append(f"{meta.relative_to(self.root)}: {exc}")
            return []
        doubled = [name for name, count in Counter(run.id for run in spec.run).items() if count > 1]
        self.errors += [f"{meta.relative_to(self.root)}: two runs named {name!r}" for name in doubled]
        return [self._run(meta.parent, run) for run in spec.run]

    def _run(self, day: Path, spec: RunSpec) -> Run:
        where = f"{day.name}/{META}, run {spec.id!r}"
        if spec.kind not in KINDS:
            self.errors.append(f"{where}: kind {spec.kind!r} is not one of {list(KINDS)}")
        if len(set(spec.columns)) != len(spec.columns):
            self.errors.append(f"{where}: a column named twice")
        if spec.transcribed and (spec.files or not spec.rows):
            self.errors.append(f"{where}: transcribed, so rows and no files")
        if not spec.transcribed and not spec.files:
            self.errors.append(f"{where}: names no file (or is it transcribed?)")
        own = PartSpec(files=spec.files, label=spec.label, code=spec.code)
        parts = tuple(self._part(day, spec, part, where) for part in [own, *spec.part])
        inputs = tuple(path for pattern in spec.inputs for path in self._match(day, pattern, spec.id, where))
        return Run(day, spec, parts, inputs)

    def _part(self, day: Path, run: RunSpec, part: PartSpec, where: str) -> Part:
        return Part(
            files=tuple(path for pattern in part.files for path in self._match(day, pattern, run.id, where)),
            kind=part.kind or run.kind,
            label=part.label or "",
            command=part.command or run.command,
            commit=run.commit if part.commit is None else part.commit,
            code=part.code or "",
            when=run.when if part.when is None else part.when,
            note=part.note or "",
        )

    def _match(self, day: Path, pattern: str, run: str, where: str) -> list[Path]:
        matched = sorted(day.glob(pattern))
        if not matched:
            self.errors.append(f"{where}: {pattern!r} matches no file")
        for path in matched:
            if path in self.claimed:
                self.errors.append(f"{path.relative_to(self.root)}: named by {self.claimed[path]} and {day.name}/{run}")
            self.claimed[path] = f"{day.name}/{run}"
        return matched

    def _unclaimed(self) -> None:
        for path in sorted(p for p in self.root.rglob("*") if p.is_file() and p.name != META):
            transcript = path.suffix in {".txt", ".log"} and path.with_suffix(".json") in self.claimed
            if path not in self.claimed and not transcript:
                day = path.relative_to(self.root).parts[0]
                self.errors.append(f"{path.relative_to(self.root)}: no run in {day}/{META} names it")


# Formatting: as the benches print their own tables.


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _rounds(values: Sequence[float], digits: int = 0) -> str:
    text = _n(statistics.median(values), digits)
    return text if len(values) < 2 else f"{text} ({', '.join(_n(v, digits) for v in values)})"


def _code(command: str) -> str:
    # "not recorded: ...", "not committed: ...": a description of how, where no command was kept.
    return command if command.startswith("not ") or "`" in command else f"`{command}`"


def _common(run: Run, part: Part, path: Path, anchor: str, measured: str, commit: str) -> dict[str, str]:
    data = run.link(path, anchor=anchor)
    if transcript := _transcript(path):
        data += f", {run.link(transcript, 'transcript')}"
    return {
        "measured": measured,
        "commit": commit or "not recorded",
        "run": f"[{part.label or run.spec.id}](#{run.entry})",
        "data": data,
        "command": _code(part.command),
    }


def _when(run: Run, part: Part) -> str:
    return f"{run.day} {part.when}".strip() if part.when else run.day


# The lab: results.json and a rung's own document.


def _load_lab(path: Path) -> Results | RungResult | None:
    document = json.loads(path.read_bytes())
    if isinstance(document, dict) and "rungs" in document and "ladder" in document:
        return Results.model_validate(document)
    if isinstance(document, dict) and "figures" in document and "label" in document and "verdict" in document:
        return RungResult.model_validate(document)
    return None


def _created(results: Results) -> str:
    stamp = results.created
    return f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}" if len(stamp) >= 13 else stamp


def _lab_commit(results: Results | None, part: Part) -> str:
    if part.code:
        return part.code
    software = results.provenance.get("software") if results else None
    if software and software["git_sha"]:
        return software["git_sha"][:7] + (" (dirty)" if software["git_dirty"] else "")
    return part.commit


def _budget(rung: RungResult) -> str:
    if rung.cpu_budget and rung.cpu_budget.asked:
        return rung.cpu_budget.asked
    budget = rung.config.get("cpu_budget", "")
    return "none" if budget in ("", "none") else budget


def _load_figure(rung: RungResult) -> str:
    if rung.mode == "capacity":
        estimate = rung.estimate
        text = estimate.show() if estimate else _n(rung.value)
        return f"{text} req/s at p99 < {rung.config.get('slo_p99_ms', 0):g} ms"
    return f"{_n(rung.figures.rps)} of {_n(rung.figures.offered_rps)} req/s"


def _cpu(rung: RungResult) -> str:
    if rung.cpu_ms_estimate:
        return rung.cpu_ms_estimate.show(3)
    target = rung.cpu_ms.get("target")
    return "" if target is None else f"{target:.3f}"


def _dependencies(rung: RungResult) -> str:
    names = {"postgres": "Postgres", "redis": "Redis", "worker-1": "worker"}
    return ", ".join(f"{names[role]} {rung.cpu_ms[role]:.3f}" for role in names if role in rung.cpu_ms)


def _bound(rung: RungResult) -> str:
    if rung.bottlenecks:
        counts = Counter(rung.bottlenecks)
        return "; ".join(f"{label} x {count}" if count > 1 else label for label, count in counts.most_common())
    return rung.verdict.ceiling


LAB_COLUMNS = [
    "measured", "commit", "run", "rung", "budget", "load", "p99 ms", "target CPU ms a request",
    "dependencies' CPU ms a request", "bound by", "data", "command",
]  # fmt: skip
# The headline's rung is always the one (the example's capacity rung): no rung column.
HEADLINE_COLUMNS = [column for column in LAB_COLUMNS if column != "rung"]


def _lab_rows(run: Run, part: Part, path: Path, document: Results | RungResult) -> Iterator[tuple[str, Row]]:
    results = document if isinstance(document, Results) else None
    rungs = document.rungs if isinstance(document, Results) else [document]
    measured = _created(results) if results else _when(run, part)
    ladder = results.ladder if results else run.spec.id
    base = run.file_anchor(path)
    for rung in rungs:
        # The headline's table: a run a row, its capacity rung's.
        if part.kind == "headline" and rung.mode != "capacity":
            continue
        anchor = base if part.kind == "headline" else f"{base}-{_slug(rung.label)}"
        fields = _common(run, part, path, anchor, measured, _lab_commit(results, part))
        fields |= {
            "rung": rung.label,
            "budget": _budget(rung),
            "load": _load_figure(rung),
            "p99 ms": f"{rung.figures.p99_ms:.1f}",
            "target CPU ms a request": _cpu(rung),
            "dependencies' CPU ms a request": _dependencies(rung),
            "bound by": _bound(rung),
        }
        yield ("headline" if part.kind == "headline" else f"lab:{ladder}"), Row(anchor, fields)


# The benches: bench_reads (its --json, or its printed transcript), bench_ingest, search_tail, cached_floor
# and drain_split transcripts.

READS_COLUMNS = [
    "measured",
    "commit",
    "run",
    "case",
    "req/s",
    "p99 ms",
    "API µs a request",
    "Postgres cores",
    "bound by",
    "data",
    "command",
]
RATIO_COLUMNS = ["measured", "commit", "run", "ratio", "median (rounds)", "goal", "data", "command"]


def _reads_rows_from_json(
    run: Run, part: Part, path: Path, servers: dict[str, dict[str, list[dict[str, Any]]]]
) -> Iterator[tuple[str, Row]]:
    base = run.file_anchor(path)
    commit = part.code or part.commit
    for by_case in servers.values():
        for case, rounds in by_case.items():
            anchor = f"{base}-{_slug(case)}"
            fields = _common(run, part, path, anchor, _when(run, part), commit)

            def median(key: str, rounds: list[dict[str, Any]] = rounds) -> float:
                return statistics.median(float(r[key]) for r in rounds)

            fields |= {
                "case": case,
                "req/s": _rounds([float(r["rps"]) for r in rounds]),
                "p99 ms": f"{median('p99_ms'):.2f}",
                "API µs a request": _n(1000 * median("api_cpu_ms_per_request")),
                "Postgres cores": f"{median('postgres_cores'):.2f}",
                "bound by": Counter(str(r["bottleneck"]) for r in rounds).most_common(1)[0][0],
            }
            yield "reads", Row(anchor, fields)
        for ratio in probe_ratios(by_case):
            name = f"{ratio.numerator} / {ratio.denominator}"
            anchor = f"{base}-{_slug(name)}"
            fields = _common(run, part, path, anchor, _when(run, part), commit)
            fields |= {"ratio": name, "median (rounds)": _rounds(ratio.rounds, 2), "goal": f"{ratio.goal:g}x"}
            yield "ratios", Row(anchor, fields)


_ROUND = re.compile(r"^round (\d+) (\S+)\s+(.+?)\s+(\d+) rps p50 ")
_RATIO = re.compile(r"^(.+) / (.+): ([\d.]+)x \(rounds ([^)]+)\); (?:meets|falls short of) the goal ([\d.]+)x$")


def _markdown_tables(text: str) -> Iterator[list[dict[str, str]]]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| endpoint |"):
            header = [cell.strip() for cell in line.strip("|").split("|")]
            rows = []
            for body in lines[i + 2 :]:
                if not body.startswith("|"):
                    break
                rows.append(
                    dict(zip(header, (cell.strip() for cell in body.strip().strip("|").split("|")), strict=True))
                )
            yield rows


def _reads_rows_from_text(run: Run, part: Part, path: Path, text: str) -> Iterator[tuple[str, Row]]:
    base = run.file_anchor(path)
    commit = part.code or part.commit
    rounds: dict[str, list[float]] = {}
    for line in text.splitlines():
        if match := _ROUND.match(line):
            rounds.setdefault(match[3], []).append(float(match[4]))
    for table in _markdown_tables(text):
        for cells in table:
            case = cells["endpoint"]
            anchor = f"{base}-{_slug(case)}"
            fields = _common(run, part, path, anchor, _when(run, part), commit)
            by_round = rounds.get(case, [])
            fields |= {
                "case": case,
                "req/s": cells["RPS"] + (f" ({', '.join(_n(v) for v in by_round)})" if len(by_round) > 1 else ""),
                "p99 ms": cells["p99 ms"],
                "API µs a request": cells.get("API µs/request", ""),
                "Postgres cores": cells.get("Postgres cores", ""),
                "bound by": cells.get("limited by (most rounds)", ""),
            }
            yield "reads", Row(anchor, fields)
    for line in text.splitlines():
        if match := _RATIO.match(line.strip()):
            name = f"{match[1]} / {match[2]}"
            anchor = f"{base}-{_slug(name)}"
            fields = _common(run, part, path, anchor, _when(run, part), commit)
            fields |= {"ratio": name, "median (rounds)": f"{match[3]} ({match[4]})", "goal": f"{match[5]}x"}
            yield "ratios", Row(anchor, fields)


INGEST_COLUMNS = [
    "measured", "commit", "run", "POST /events accepted/s", "p99 ms", "CPU µs a request", "× the direct INSERT",
    "batches of 500: events/s", "one worker: rows/s", "CPU µs a row", "accept → visible p99 ms", "data", "command",
]  # fmt: skip


def _ingest_rows(
    run: Run, part: Part, path: Path, rounds: list[dict[str, dict[str, float]]]
) -> Iterator[tuple[str, Row]]:
    anchor = run.file_anchor(path)

    def median(case: str, key: str) -> float:
        return statistics.median(r[case][key] for r in rounds)

    fields = _common(run, part, path, anchor, _when(run, part), part.code or part.commit)
    fields |= {
        "POST /events accepted/s": _rounds([r["single"]["rps"] for r in rounds]),
        "p99 ms": f"{median('single', 'p99_ms'):.1f}",
        "CPU µs a request": _n(median("single", "cpu_us_per_request")),
        "× the direct INSERT": f"{median('single', 'rps') / median('baseline', 'rps'):.1f}x "
        f"({_n(median('baseline', 'rps'))} accepted/s)",
        "batches of 500: events/s": _n(median("batch", "events_per_s")),
        "one worker: rows/s": _rounds([r["drain"]["rows_per_s"] for r in rounds]),
        "CPU µs a row": f"{median('drain', 'cpu_us_per_row'):.1f}",
        "accept → visible p99 ms": _n(median("lag", "lag_p99_ms")),
    }
    yield "ingest", Row(anchor, fields)


TAIL_COLUMNS = [
    "measured",
    "commit",
    "run",
    "variant",
    "k6 p95 ms",
    "k6 p99 ms (rounds)",
    "k6 CPU ms a request",
    "k6 peak RSS MB",
    "searches the app answered within 10 ms",
    "data",
    "command",
]


def _tail_rows(
    run: Run, part: Part, path: Path, variants: dict[str, list[dict[str, float]]]
) -> Iterator[tuple[str, Row]]:
    base = run.file_anchor(path)
    for variant, rounds in variants.items():
        anchor = f"{base}-{_slug(variant)}"

        def median(key: str, rounds: list[dict[str, float]] = rounds) -> float | None:
            return statistics.median(r[key] for r in rounds) if key in rounds[0] else None

        fields = _common(run, part, path, anchor, _when(run, part), part.code or part.commit)
        cpu, rss = median("k6_cpu_ms_per_request"), median("k6_peak_rss_mb")
        fields |= {
            "variant": variant,
            "k6 p95 ms": f"{median('p95_ms'):.1f}",
            "k6 p99 ms (rounds)": _rounds([r["p99_ms"] for r in rounds], 1),
            "k6 CPU ms a request": "" if cpu is None else f"{cpu:.3f}",
            "k6 peak RSS MB": "" if rss is None else _n(rss),
            "searches the app answered within 10 ms": f"{median('app_within_10ms'):.4%}",
        }
        yield "tail", Row(anchor, fields)


FLOOR_COLUMNS = ["measured", "commit", "run", "hello req/s", "floor req/s", "floor / hello (rounds)", "data", "command"]
_FLOOR = re.compile(r"^hello ([\d,]+) req/s, floor ([\d,]+): floor / hello ([\d.]+) \(rounds ([^)]+)\)$")
DRAIN_COLUMNS = [
    "measured",
    "commit",
    "run",
    "rows/s",
    "worker µs a row",
    "Postgres µs a row",
    "Redis µs a row",
    "data",
    "command",
]
_DRAIN = re.compile(
    r"^round \d+: ([\d,]+) events, ([\d,]+) rows/s; µs CPU a row: worker ([\d.]+), Postgres ([\d.]+), Redis ([\d.]+)$"
)
TEXT_COLUMNS = ["measured", "commit", "run", "data", "command"]


def _text_rows(run: Run, part: Part, path: Path, text: str) -> Iterator[tuple[str, Row]]:
    base = run.file_anchor(path)
    if "| endpoint |" in text:
        yield from _reads_rows_from_text(run, part, path, text)
        return
    floors = [match for line in text.splitlines() if (match := _FLOOR.match(line.strip()))]
    drains = [match for line in text.splitlines() if (match := _DRAIN.match(line.strip()))]
    commit = part.code or part.commit
    for match in floors:
        fields = _common(run, part, path, base, _when(run, part), commit)
        fields |= {
            "hello req/s": match[1],
            "floor req/s": match[2],
            "floor / hello (rounds)": f"{match[3]} ({match[4]})",
        }
        yield "floor", Row(base, fields)
    for number, match in enumerate(drains, 1):
        anchor = f"{base}-{number}"
        fields = _common(run, part, path, anchor, _when(run, part), commit)
        fields |= {
            "rows/s": match[2],
            "worker µs a row": match[3],
            "Postgres µs a row": match[4],
            "Redis µs a row": match[5],
        }
        yield "drain", Row(anchor, fields)
    if not floors and not drains:
        yield "text", Row(base, _common(run, part, path, base, _when(run, part), commit))


# The CI gates' campaigns (`benchmarks/gate_campaign.py`): a row a setting.

GATE_COLUMNS = [
    "measured", "commit", "run", "gate", "setting", "false alarms (A/A)", "A/A change, median [min, max]",
    "3% caught", "3% as measured", "5% caught", "5% as measured", "10% caught", "10% as measured", "20% caught",
    "20% as measured", "runner s a gate run (median)", "errors", "data", "command",
]  # fmt: skip


def _gate_rows(run: Run, part: Part, path: Path, document: dict[str, Any]) -> Iterator[tuple[str, Row]]:
    campaign = Campaign.from_json(document)
    base = run.file_anchor(path)
    for cells in setting_rows(campaign):
        anchor = f"{base}-{_slug(cells['setting'].partition(' ')[0])}"
        fields = _common(run, part, path, anchor, _when(run, part), campaign.commit or part.code or part.commit)
        yield "gate", Row(anchor, fields | {"gate": campaign.gate} | cells)


def _rows(run: Run, part: Part, path: Path) -> Iterator[tuple[str, Row]]:
    for key, row in _read(run, part, path):
        row.path, row.before = path, bool(part.code)
        row.target = path.relative_to(run.folder.parent.parent).as_posix()
        yield key, row


def _read(run: Run, part: Part, path: Path) -> Iterator[tuple[str, Row]]:
    if path.suffix == ".json":
        document = json.loads(path.read_bytes())
        if lab := _load_lab(path):
            yield from _lab_rows(run, part, path, lab)
        elif isinstance(document, dict) and document.get("kind") == "gate-campaign":
            yield from _gate_rows(run, part, path, document)
        elif isinstance(document, dict) and set(document) == {"granian"}:
            yield from _reads_rows_from_json(run, part, path, document)
        elif (
            isinstance(document, list)
            and document
            and set(document[0]) == {"baseline", "single", "batch", "drain", "lag"}
        ):
            yield from _ingest_rows(run, part, path, document)
        elif isinstance(document, dict) and all(
            isinstance(v, list) and v and "p99_ms" in v[0] for v in document.values()
        ):
            yield from _tail_rows(run, part, path, document)
        else:
            raise RecordError(f"{run.day}/{path.relative_to(run.folder)}: a JSON file of no shape this page knows")
    else:
        yield from _text_rows(run, part, path, path.read_text())


# The data tables of a kind, in the page's order ("lab": one a ladder, by its name).
TABLES = ["headline", "reads", "ratios", "floor", "tail", "ingest", "drain", "lab", "gate", "text"]


def _title(kind: str, key: str) -> tuple[str, list[str]]:
    if key.startswith("lab:"):
        return f"The `{key[4:]}` ladder (the lab)", LAB_COLUMNS
    return {
        "headline": ("Capacity on the realistic mix, the lab's headline example", HEADLINE_COLUMNS),
        "reads": ("Closed loop, by case (`bench_reads`)", READS_COLUMNS),
        "ratios": ("The probe's ratios, round by round", RATIO_COLUMNS),
        "ingest": ("`bench_ingest`", INGEST_COLUMNS),
        "tail": ("The load generator's tail (`search_tail`)", TAIL_COLUMNS),
        "floor": ("The cached read's floor (`cached_floor`)", FLOOR_COLUMNS),
        "drain": ("One worker's drain (`drain_split`)", DRAIN_COLUMNS),
        "gate": ("A/A and A/B trials of a CI gate (`gate_campaign`)", GATE_COLUMNS),
        "text": ("Other measurements, as their files record them", TEXT_COLUMNS),
    }[key]


def _transcribed(run: Run) -> Table:
    """A run that kept no data file: its table as the notebook had it, its rows keyed by their first cell."""
    spec = run.spec
    caption = (
        _code(spec.command)
        + (f" at {spec.commit}" if spec.commit else "")
        + (f", {spec.when} UTC" if spec.when else "")
        + (f". {spec.note}" if spec.note else "")
        + f" Transcribed from {spec.transcribed} ({run.link(run.folder / META)})."
    )
    table = Table(spec.kind, run.anchor, f"{run.day}: {spec.title}", spec.columns, caption=caption)
    keys: Counter[str] = Counter()
    for cells in spec.rows:
        if len(cells) != len(spec.columns):
            raise RecordError(
                f"{run.day}/{META}, run {spec.id!r}: a row of {len(cells)} cells, not {len(spec.columns)}"
            )
        keys[key := _slug(cells[0]) or "row"] += 1
        anchor = f"{run.anchor}-{key}" + (f"-{keys[key]}" if keys[key] > 1 else "")
        table.rows.append(Row(anchor, dict(zip(spec.columns, cells, strict=True))))
    return table


def _ordered(item: tuple[tuple[str, str], Table]) -> tuple[int, int, str]:
    # By kind; in a kind, the tables read from data first, in the order of TABLES, then the transcribed
    # ones, newest first (the sort is stable).
    (kind, key), _ = item
    if key.startswith("transcribed:"):
        return list(KINDS).index(kind), len(TABLES), ""
    return list(KINDS).index(kind), TABLES.index(key.partition(":")[0]), key


def build(root: Path = RESULTS) -> Record:
    """The page's tables and the runs they come from, newest first: the days in reverse, a day's runs in
    the reverse of the order its measured.toml lists them (the order they ran), a run's rows by the time
    they were measured."""
    runs = load_runs(root)
    tables: dict[tuple[str, str], Table] = {}
    listed: dict[str, list[Run]] = {}
    for run in reversed(runs):
        if run.spec.transcribed:
            tables[(run.spec.kind, f"transcribed:{run.anchor}")] = _transcribed(run)
            continue
        for kind in dict.fromkeys(part.kind for part in run.parts):
            listed.setdefault(kind, []).append(run)
        produced = [
            (part.kind, key, row)
            for part in reversed(run.parts)
            for path in reversed(part.files)
            for key, row in _rows(run, part, path)
        ]
        for kind, key, row in sorted(produced, key=lambda item: item[2].fields["measured"], reverse=True):
            title, columns = _title(kind, key)
            anchor = f"{kind}-{_slug(key.removeprefix('lab:'))}"
            tables.setdefault((kind, key), Table(kind, anchor, title, columns)).rows.append(row)
    anchors = Counter(row.anchor for table in tables.values() for row in table.rows)
    if doubled := [anchor for anchor, count in anchors.items() if count > 1]:
        raise RecordError(f"rows with the same anchor (give their runs' parts labels or files other names): {doubled}")
    return Record(runs, [table for _, table in sorted(tables.items(), key=_ordered)], listed)
