"""From findings to a measurement: a ladder for `tenk lab run` that measures the app as it is, then each
configuration fix doctor found, one variable per rung.

The first rung is the server as the source says it runs (or uvicorn's defaults where nothing says).
Then, in order and only where a finding says it would change something: the access log off, uvloop,
httptools, as many workers as the deployment's cores, and granian. A code-level finding gets a rung
only against a patched copy of the app the user names (`--patched module:app`): doctor never edits code.
The studies' figures ride along as claims, so the lab's report says whether they hold here.

The reasons quote the app's file names and source lines, and the values may hold its route paths: every
such string is written escaped (`formats._escape`), so the TOML holds exactly the tables doctor means.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from tenk.doctor._diagnose import Report
from tenk.doctor._findings import Finding
from tenk.doctor._rules import CONFIGURATION_RULES, RULES
from tenk.doctor.formats._escape import printable, toml_string
from tenk.doctor.rules.server import ServerRun, as_configured, server_runs

# Matched whole (`fullmatch`): `$` alone lets a trailing newline by.
BASELINE_MODULE = re.compile(r"tenk\.lab\.targets\.baselines\.(\w+):app")
APP_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
# Where the capacity search starts, in requests a second.
START_RATE = 10


class LadderError(Exception):
    """A ladder cannot be written for this target (it needs `module:app`)."""


@dataclass
class _Rung:
    label: str
    changes: dict[str, str | int | bool]
    why: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Claim:
    text: str
    source: str
    from_rung: str
    to_rung: str
    claimed_ratio: float


def write_ladder(report: Report, out: Path, patched: str | None = None, mix: str | None = None) -> Path:
    """Write the ladder to `out` (and a mix of the app's GET routes beside it, when no mix is named)."""
    app = report.target if APP_PATTERN.fullmatch(report.target) else None
    if app is None:
        raise LadderError("a ladder needs the target as module:app (the lab serves it), not a path")
    if patched is not None and not APP_PATTERN.fullmatch(patched):
        raise LadderError(f"--patched {patched!r}: expected module:app")
    baseline = BASELINE_MODULE.fullmatch(app)
    target = f"baseline:{baseline.group(1)}" if baseline else app
    run = as_configured(server_runs(report.context))
    try:
        if mix is None:
            mix = "realistic" if baseline else _write_mix(report, out)
        text = _ladder_text(report, target, run, mix, patched, bool(baseline))
    except ValueError as exc:  # a string TOML cannot hold (toml_string)
        raise LadderError(str(exc)) from None
    out.write_text(text, encoding="utf-8")
    return out


def _ladder_text(
    report: Report, target: str, run: ServerRun | None, mix: str, patched: str | None, baseline: bool
) -> str:
    rules = {f.rule: f for f in report.findings}
    server = run.server if run is not None and run.server in ("uvicorn", "gunicorn") else "uvicorn"
    uvicorn_like = server == "uvicorn"
    loop = "asyncio" if "no-uvloop" in rules or (run is not None and run.loop == "asyncio") else "uvloop"
    http = "h11" if "h11-parser" in rules else "httptools"
    access_log = run.access_log_on if run is not None else True
    workers = (run.workers if run is not None else None) or 1
    cores = max(2, math.ceil(run.cores)) if run is not None and run.cores else 2
    rungs = [_Rung("as it is", {}, [_as_it_is(run)])]
    if access_log:
        rungs.append(_Rung("access log off", {"access_log": False}, _because(rules.get("access-log"))))
    if uvicorn_like and loop == "asyncio":
        rungs.append(_Rung("uvloop", {"loop": "uvloop"}, _because(rules.get("no-uvloop"))))
    if uvicorn_like and http == "h11":
        rungs.append(_Rung("httptools", {"http": "httptools"}, _because(rules.get("h11-parser"))))
    if workers < cores:
        why = _because(rules.get("one-worker")) or [f"the target is pinned to {cores} cores (cpus)"]
        rungs.append(_Rung(f"{cores} workers", {"workers": cores}, why))
    rungs.append(_Rung("granian", {"server": "granian"}, ["another server, the last configuration-level change"]))
    if patched is not None:
        code = sorted({f.rule for f in report.findings if f.rule not in CONFIGURATION_RULES})
        rungs.append(_Rung("patched", {"target": patched}, [f"the code-level fixes: {', '.join(code) or 'none'}"]))
    claims = _claims([rung.label for rung in rungs])
    lines = [
        f"name = {toml_string('doctor-' + re.sub(r'[^A-Za-z0-9_-]+', '-', target).strip('-'))}",
        "# Written by `tenk doctor --ladder`: the app as it is, then one configuration fix per rung.",
        f"# Run it with `tenk lab run {{this file}}`. Findings: {len(report.findings)} in {printable(report.target)}.",
        f"description = {toml_string(f'What fixing doctor findings buys on {target}: one variable per rung')}",
        "repeats = 3",
        "",
        "[defaults]",
        f"target = {toml_string(target)}",
        f"server = {toml_string(server)}",
        f"workers = {workers}",
        f"loop = {toml_string(loop)}",
        f"http = {toml_string(http)}",
        f"access_log = {_toml(access_log)}",
        f"# {cores} cores from the start, so that the workers rung changes the workers alone.",
        f"cpus = {toml_string(f'0-{cores - 1}')}",
        f"mix = {toml_string(mix)}",
        "capacity = true",
        "slo_p99_ms = 100",
        "# Low: an app doctor is asked about may serve a few requests a second (the ladder study's v1:",
        "# 1.68); doubling from here reaches thousands within the search's budget.",
        f"start_rate = {START_RATE}",
        "step_s = 4",
        "capacity_budget_s = 90",
        "warmup_s = 3",
    ]
    if baseline:
        lines += [
            "",
            "[defaults.env]",
            "# The baseline's own access log off: the server's is the one measured.",
            'NAIVE_ACCESS_LOG = "0"',
            "",
            "[defaults.upstream]",
            "# The mix's quotes call the mock vendor: at its default p99 (400 ms) no rung could keep a 100 ms p99,",
            "# so it runs at the async-ladder preset's fast setting and the app's own cost is what is measured.",
            "p50_ms = 10",
            "p99_ms = 50",
        ]
    for rung in rungs:
        lines += [
            "",
            "[[rung]]",
            *(f"# {printable(reason)}" for reason in rung.why),
            f"label = {toml_string(rung.label)}",
        ]
        lines += [f"{key} = {_toml(value)}" for key, value in rung.changes.items()]
    for claim in claims:
        lines += [
            "",
            "[[claim]]",
            f"text = {toml_string(claim.text)}",
            f"source = {toml_string(claim.source)}",
            f"from_rung = {toml_string(claim.from_rung)}",
            f"to_rung = {toml_string(claim.to_rung)}",
            'metric = "capacity"',
            f"claimed_ratio = {claim.claimed_ratio}",
        ]
    return "\n".join(lines) + "\n"


def _claims(labels: list[str]) -> list[_Claim]:
    """The studies' ratios for the rungs the ladder has, from the cost table, for the lab to check."""
    claims = []
    workers = next((label for label in labels if label.endswith(" workers")), None)
    for rule, rung in (("access-log", "access log off"), ("one-worker", workers)):
        study = RULES[rule].cost.study
        if rung is None or rung not in labels or study is None or study.ratio is None:
            continue
        text = f"{rule}: the study's own figure ({study.seed}): {study.figure}"
        claims.append(_Claim(text, study.seed, labels[labels.index(rung) - 1], rung, study.ratio))
    return claims


def _as_it_is(run: ServerRun | None) -> str:
    if run is None:
        return "no server configuration found: uvicorn's defaults (access log on, 1 worker)"
    return f"as {run.path.name}:{run.line} runs it: {run.code}"


def _because(finding: Finding | None) -> list[str]:
    return [f"{finding.rule}: {finding.path.name}:{finding.line}: {finding.message}"] if finding else []


def _toml(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else toml_string(value)


def _write_mix(report: Report, out: Path) -> str:
    """A mix of the app's GET routes without path parameters, equally weighted, beside the ladder."""
    routes = {
        path
        for entry in report.context.entries.of_kind("route")
        if entry.registration is not None
        and (path := _route_path(entry.registration)) is not None
        and "{" not in path
        and _method(entry.registration) == "get"
    }
    # The lab refuses a path with whitespace or a control character (it would be no URL path).
    paths = sorted(path for path in routes if path.isprintable() and not any(char.isspace() for char in path))
    if not paths:
        raise LadderError("no GET route without path parameters found for a mix: name one with --mix")
    lines = [
        f"name = {toml_string(out.stem + '-mix')}",
        "# Written by `tenk doctor --ladder`: the app's GET routes as written in their decorators. A router's",
        "# prefix given to include_router is not applied: check the paths before running.",
        f"description = {toml_string('GET routes of ' + report.target)}",
    ]
    lines += [f"# Left out, a path the lab would refuse: {printable(path)}" for path in sorted(routes - set(paths))]
    for index, path in enumerate(paths):
        lines += ["", "[[endpoint]]", f'name = "route_{index}"', f"path = {toml_string(path)}", "weight = 1"]
    mix_path = out.with_name(out.stem + "-mix.toml")
    mix_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return mix_path.name


def _route_path(call: ast.Call) -> str | None:
    first = call.args[0] if call.args else next((kw.value for kw in call.keywords if kw.arg == "path"), None)
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _method(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else "get"
