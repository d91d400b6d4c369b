"""Comments and docstrings under src/ say how and why, never how much (docs/contributing.md, "Comments").

What is read: every comment and docstring of every .py under src/, the `description=` of every call there
(the settings' descriptions, which `tenk settings` prints into docs/settings.md, and the API's fields'),
and the comments of every TOML file shipped under src/ (the lab's ladders, presets and mixes).

A *figure* is a number with a unit of speed or cost: a rate (`req/s`, `rows/s`, `rps`, "events a
second"), an instruction count, a duration (ns, µs, ms, s, seconds, minutes), a size (KB, MiB, GB...), a
share of a core ("0.4 of a core", "0.99 cores"), a speed ratio (`3x`, `2×`) or a share of something
("44 % of its CPU"). Written alone, a figure is a specification: a setting, a default, a bound, an SLO,
an interval's level, an example's arithmetic (a 10 ms quota period, a 95 % interval, a 100 ms p99 SLO).
It is a *measurement*, and fails here, when the clause it stands in (the text between `.`, `;` and `,`)
says that it was observed:

- a measuring verb, or one that reports what happened: measured, cost, took, spent, served, ran, was,
  rose, fell, went, grew, dropped, reached, saved, gained, showed, peaked, averaged;
- an approximation written just before a number: about, around, roughly, near, nearly, almost, some, ~, ≈;
- a comparison: against, versus, vs, `->`, `→`, or a change from one figure to another in one unit
  ("from 94k to 18k rows/s"; a scale, "from 1 µs to 10 minutes", names each end's unit);
- a range of figures (`63-66 ms`), or a date (`2026-11-29`) outside a results path or anchor.

An instruction count and a speed ratio ("1.4x faster") are measurements wherever they stand: nothing in
tenk sets one.

A figure that justifies a design lives in data; the comment names where: a budget
(`budgets.json: cached_hit`), a folder of docs/results/, a row or table of the generated Results page
(`docs/results.md#2026-11-26-search-throughput`), or, for a figure no data file holds, the commit whose
message has it. The budgets, folders and anchors named are checked too: each must exist (a commit is
not: a shallow clone has none).
"""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
# The workspace's other members (tenk-doctor): their source is read as src/ is.
PACKAGES = ROOT / "packages"
BUDGETS = ROOT / "benchmarks" / "budget" / "budgets.json"
RESULTS_PAGE = ROOT / "docs" / "results.md"


@dataclass(frozen=True)
class Prose:
    """A comment block, a docstring or a description: where it is, and its lines (number, text)."""

    path: Path
    lines: tuple[tuple[int, str], ...]

    @property
    def text(self) -> str:
        return "\n".join(text for _, text in self.lines)

    def line_at(self, offset: int) -> int:
        return self.lines[self.text.count("\n", 0, offset)][0]


# What is read.


def python_prose(path: Path) -> Iterator[Prose]:
    """A .py file's comments (a run of whole-line comments is one block), docstrings and descriptions."""
    source = path.read_text()
    block: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        row, col = token.start
        text = token.string.lstrip("#").strip()
        whole_line = not token.line[:col].strip()
        if block and whole_line and block[-1][0] == row - 1:
            block.append((row, text))
            continue
        if block:
            yield Prose(path, tuple(block))
        block = [(row, text)]
        if not whole_line:
            yield Prose(path, tuple(block))
            block = []
    if block:
        yield Prose(path, tuple(block))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = node.body[0] if node.body else None
            if isinstance(docstring, ast.Expr) and isinstance(value := _constant(docstring.value), str):
                yield _string(path, docstring.lineno, value)
        if (
            isinstance(node, ast.keyword)
            and node.arg == "description"
            and isinstance(value := _constant(node.value), str)
        ):
            # An implicitly joined string is one constant: its lines are not the source's, so all at its first.
            yield Prose(path, ((node.value.lineno, value),))


def _constant(node: ast.expr) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _string(path: Path, line: int, value: str) -> Prose:
    return Prose(path, tuple((line + i, text.strip()) for i, text in enumerate(value.splitlines())))


def toml_prose(path: Path) -> Iterator[Prose]:
    """A TOML file's comments, a run of whole-line comments one block; `#` inside a string is no comment."""
    block: list[tuple[int, str]] = []
    in_multiline: str | None = None
    for row, line in enumerate(path.read_text().splitlines(), start=1):
        comment, in_multiline = _toml_comment(line, in_multiline)
        if comment is None:
            if block:
                yield Prose(path, tuple(block))
            block = []
            continue
        whole_line = line.lstrip().startswith("#")
        if block and not whole_line:
            yield Prose(path, tuple(block))
            block = []
        block.append((row, comment.lstrip("#").strip()))
        if not whole_line:
            yield Prose(path, tuple(block))
            block = []
    if block:
        yield Prose(path, tuple(block))


def _toml_comment(line: str, in_multiline: str | None) -> tuple[str | None, str | None]:
    """The comment on `line` (None if none), and the multi-line string still open after it."""
    i = 0
    while i < len(line):
        if in_multiline:
            end = line.find(in_multiline, i)
            if end < 0:
                return None, in_multiline
            i, in_multiline = end + 3, None
            continue
        char = line[i]
        if char == "#":
            return line[i:], None
        if line.startswith(('"""', "'''"), i):
            in_multiline, i = line[i : i + 3], i + 3
            continue
        if char in "\"'":
            i += 1
            while i < len(line) and line[i] != char:
                i += 2 if char == '"' and line[i] == "\\" else 1
        i += 1
    return None, in_multiline


@functools.cache
def everything() -> tuple[Prose, ...]:
    python = [item for root in (SRC, PACKAGES) for path in sorted(root.rglob("*.py")) for item in python_prose(path)]
    toml = [item for root in (SRC, PACKAGES) for path in sorted(root.rglob("*.toml")) for item in toml_prose(path)]
    return (*python, *toml)


# The rule.

_NUMBER = r"(?<![\w.%])\d+(?:[.,]\d+)*(?:\s?[kM](?![A-Za-z]))?"
_UNIT = (
    r"(?:\s?[A-Za-z]+/s\b"  # req/s, rows/s, searches/s, MB/s
    r"|\s(?:rps|RPS)\b"
    r"|\s(?:requests|rows|events|searches|queries|calls|reads|writes) (?:a|per) second\b"
    r"|\s(?:instructions|insns)\b"
    r"|(?:\sCPU)?\s?(?:ns|µs|μs|us|ms)\b"
    r"|\s(?:s|sec|seconds?|minutes?)\b"
    r"|\s?[KMGT]i?B\b"
    r"|\s(?:cores?|CPUs?)\b"
    r"|\sof (?:a|one|its|the [\w']+) (?:cores?|CPU)\b"
    r"|[x×](?![\w])"
    r"|\s?%\s+of\b)"
)
FIGURE = re.compile(_NUMBER + _UNIT)
INSTRUCTIONS = re.compile(_NUMBER + r"\s(?:instructions|insns)\b")
SPEEDUP = re.compile(_NUMBER + r"\s?[x×]\s+(?:faster|slower|quicker|cheaper|dearer|the throughput|as fast)\b")
_VERBS = "measured|measuring|costs?|costing|took|spent|served|ran|was|were|rose|fell|went|grew|dropped|reached"
_VERBS += "|saved|gained|showed|peaked|averaged"
_APPROXIMATELY = "about|around|roughly|nearly|near|almost|some|approximately"
SIGNS = {
    "a measuring verb": re.compile(rf"(?i:\b(?:{_VERBS})\b)"),
    "an approximation": re.compile(rf"(?:(?i:\b(?:{_APPROXIMATELY}))\s|~|≈)\s?\d"),
    # A change keeps one unit for both ends ("from 94k to 18k rows/s"); a scale names each end's
    # ("from 1 µs to 10 minutes"), and is a specification.
    "a comparison": re.compile(
        r"(?i:\b(?:against|versus|vs)\b)|->|→|\bfrom\s+(?:about\s|~)?" + _NUMBER + r"\s+to\s+~?" + FIGURE.pattern
    ),
    "a range": re.compile(_NUMBER + r"\s?[-–]\s?" + FIGURE.pattern),
    "a date": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
}
_ALWAYS = ((INSTRUCTIONS, "an instruction count"), (SPEEDUP, "a speed ratio"))
# Where results live is a place, not a date: a folder of docs/results/, an anchor of the Results page.
_PLACES = re.compile(r"docs/results[\w./*#-]*|#20\d\d-\d\d-\d\d[\w-]*")
_CLAUSE_END = re.compile(r"[.;,](?=\s)")


@dataclass(frozen=True)
class Quote:
    """A measured figure in prose: where, the clause, and what made it a measurement."""

    line: int
    clause: str
    figure: str
    sign: str


def measured_figures(prose: Prose) -> list[Quote]:
    text = prose.text
    quotes = []
    start = 0
    for end in [match.start() for match in _CLAUSE_END.finditer(text)] + [len(text)]:
        clause = text[start:end]
        quotes += [
            Quote(prose.line_at(start + offset), " ".join(clause.split()), " ".join(figure.split()), sign)
            for offset, figure, sign in _measured_in_clause(clause)
        ]
        start = end + 1
    return quotes


def _measured_in_clause(clause: str) -> Iterator[tuple[int, str, str]]:
    always = {match.start(): (match.group(), sign) for pattern, sign in _ALWAYS for match in pattern.finditer(clause)}
    for start, (figure, sign) in always.items():
        yield start, figure, sign
    figures = [match for match in FIGURE.finditer(clause) if match.start() not in always]
    if not figures:
        return
    plain = _PLACES.sub("", clause)
    signs = [name for name, pattern in SIGNS.items() if pattern.search(plain)]
    if signs:
        for match in figures:
            yield match.start(), match.group(), signs[0]


def findings(prose: Iterable[Prose]) -> list[str]:
    return [
        f"{item.path.relative_to(ROOT)}:{quote.line}: {quote.figure!r} ({quote.sign}) in {quote.clause!r}"
        for item in prose
        for quote in measured_figures(item)
    ]


def test_no_comment_docstring_or_description_under_src_quotes_a_measurement() -> None:
    found = findings(everything())
    assert not found, (
        "comments say how and why, never how much: name the budget or results entry that holds the figure "
        "(docs/contributing.md, 'Comments'):\n  " + "\n  ".join(found)
    )


MEASUREMENTS = [
    "that was about 140,000 of a Redis hit's 465,000 instructions",
    "256MB served 1,810 searches/s at p99 57.5 ms where 2GB served 1,916 at p99 44.6",
    "that cost 17,200 -> 2,800 req/s at a 1 % sample ratio",
    "under 64 connections ran at p50 7.5 ms but p99 63-66 ms",
    "the buffer descriptors (measured here: ~22 MB and ~25 ms a GB)",
    "The syscall costs ~0.4 us an id.",
    "one worker went from 94k to 18k rows/s",
    "Postgres spent 44 % of its CPU a search with the cache off",
    "Two tenk workers under 150m took over 45 s to start.",
    "18.5 against 23.2 us of Postgres CPU a row",
    "the SDK's call through both samplers costs 2 us",
    "held 89 % of its core beside neighbours (2026-11-29)",
    "the new pool is 1.4x faster than the old one",
    "k6's p99 was 123 ms with Go's defaults",
]
SPECIFICATIONS = [
    "with the kernel's 100 ms default a 300m budget can stall a request 70 ms, near a 100 ms p99 SLO",
    "at 10 ms the stall is at most 7 ms. Shorter periods cost scheduler work per period, and 10 ms is "
    "still well above the 1 ms the kernel accepts.",
    "A figure measured several times: its median and a 95 % bootstrap interval of that median.",
    "Log-spaced buckets, 5% wide, from 0.05 ms to past 10 minutes: quantiles are read to within 5%.",
    "an encoded histogram in microseconds, from 1 µs to 10 minutes.",
    "Arrivals k6 started that had no answer when it stopped (the step, then its 5 s grace)",
    "Per-minute rates keep small shares exact: 7% of 30 req/s is 126/min, not a rounded 2/s.",
    "Rungs where B is worse than A by at least `threshold` (0.10 = 10 %), with statistical support.",
    "the server's defaults are 512 MB and 1 GB",
    "within 128MB-16GB, as Postgres's docs advise",
    "the bounds are over 2x apart",
    "Seconds of Postgres statement time a second (0.15: 15% of a core's worth)",
    "names the fsync policy the 202s promise",
    "and a budget of B cores: less CPU a row (docs/results.md#2026-11-29-flush-cost)",
    "what batching saves (docs/results/2026-11-29/redis-batch/), one request at 100 ms",
]


@pytest.mark.parametrize("text", MEASUREMENTS)
def test_a_figure_with_a_sign_of_measuring_is_a_measurement(text: str) -> None:
    assert measured_figures(Prose(Path("x.py"), ((1, text),))), text


@pytest.mark.parametrize("text", SPECIFICATIONS)
def test_a_setting_a_bound_or_an_example_is_a_specification(text: str) -> None:
    assert not measured_figures(Prose(Path("x.py"), ((1, text),))), text


def test_a_figure_split_over_two_comment_lines_is_found_on_its_line(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text("# The pool's cost: before the cut, a read took\n# 7.5 ms.\nX = 1  # trailing\n")
    (quote,) = [quote for item in python_prose(source) for quote in measured_figures(item)]
    assert (quote.line, quote.figure) == (2, "7.5 ms")


def test_toml_comments_are_read_and_strings_are_not(tmp_path: Path) -> None:
    ladder = tmp_path / "ladder.toml"
    ladder.write_text(
        'name = "a # not a comment"\n'
        'description = """several lines,\n# still the string, it served 10 req/s\n"""\n'
        "rate = 200  # about 200 req/s, measured\n"
        "# a whole-line comment\n"
    )
    prose = list(toml_prose(ladder))
    assert [item.text for item in prose] == ["about 200 req/s, measured", "a whole-line comment"]
    assert [quote.line for item in prose for quote in measured_figures(item)] == [5]


# The names the prose gives for where figures live.

_RESULTS_PATH = re.compile(r"docs/results/[\w./*-]*[\w/*]")
_RESULTS_PAGE = re.compile(r"docs/results\.md(#[\w-]+)?")
_BUDGET = re.compile(r"budgets\.json: ([a-z_]+(?:, [a-z_]+)*)")
_ANCHOR = re.compile(r"\{ #([\w-]+) \}")


def test_every_results_entry_and_budget_that_prose_under_src_names_exists() -> None:
    budgets = set(json.loads(BUDGETS.read_text()))
    anchors = set(_ANCHOR.findall(RESULTS_PAGE.read_text()))
    wrong = []
    for item in everything():
        where = f"{item.path.relative_to(ROOT)}:{item.lines[0][0]}"
        text = " ".join(item.text.split("\n"))
        for path in _RESULTS_PATH.findall(text):
            if not any(ROOT.glob(path.rstrip("/"))):
                wrong.append(f"{where}: {path} does not exist")
        for match in _RESULTS_PAGE.finditer(text):
            anchor = match.group(1)
            if anchor is None:
                wrong.append(f"{where}: docs/results.md is generated; name a row or table of it (#anchor)")
            elif anchor[1:] not in anchors:
                wrong.append(f"{where}: docs/results.md has no anchor {anchor}")
        for names in _BUDGET.findall(text):
            wrong += [f"{where}: budgets.json has no {name}" for name in names.split(", ") if name not in budgets]
    assert not wrong, "\n  ".join(["prose under src/ names results that are not there:", *wrong])
