"""The evaluation's tables, in markdown, from a run's summary.json (what docs/doctor.md quotes)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} % ({part}/{whole})" if whole else "-"


def _seconds(meta: dict[str, Any], mode: str) -> str:
    run = meta.get(mode)
    if not run:
        return "-"
    if run["seconds"] is None:
        return f"exit {run['exit_code']}"
    return f"{run['seconds']:.1f} s"


def _entry_points(meta: dict[str, Any]) -> str:
    shown = []
    for mode in ("directory", "module"):
        run = meta.get(mode)
        shown.append("-" if not run or run["entry_points"] is None else str(run["entry_points"]))
    return " / ".join(shown)


def _notes(app: dict[str, Any]) -> str:
    notes = app.get("notes")
    return "-" if notes is None else f"{notes['doctor-directory']} / {notes['doctor-module']}"


def per_app(summary: dict[str, Any]) -> list[str]:
    rows = [
        "| app | ORM | lines | entry points (dir / module) | time (dir / module) | findings (dir / module) "
        "| notes (dir / module) | drawn | judged | real | advice | false | precision | TP labels | recall (dir) "
        "| recall (module) | chain from the label's entry |",
        "|---|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---|---|---:|",
    ]
    for a in summary["apps"]:
        meta = a["doctor"]
        sample = a["sample"]
        judged = sample["real"] + sample["advice"] + sample["false"]
        lines = meta.get("directory", {}).get("lines")
        tp = a["labels"]["tp"]
        module = _percent(len(a["found"]["doctor-module"]), tp) if a["entry"] else "-"
        rows.append(
            f"| {a['app']} {a['version']}, `{a['target']}` | {a['orm']} | {lines or '-':,} "
            f"| {_entry_points(meta)} | {_seconds(meta, 'directory')} / {_seconds(meta, 'module')} "
            f"| {a['findings']['doctor-directory']} / {a['findings']['doctor-module']} | {_notes(a)} "
            f"| {sample['drawn']} | {judged} "
            f"| {sample['real']} | {sample['advice']} | {sample['false']} | {_percent(sample['real'], judged)} "
            f"| {tp} | {_percent(len(a['found']['doctor-directory']), tp)} | {module} "
            f"| {len(a.get('same_entry', []))} of {len(a.get('chained', []))} |"
        )
    return rows


def per_rule(summary: dict[str, Any]) -> list[str]:
    counts: dict[str, Counter[str]] = {}
    for a in summary["apps"]:
        for rule, c in a["by_rule"].items():
            counts.setdefault(rule, Counter()).update(c)
        for category, c in a["recall_by_category"].items():
            entry = counts.setdefault(category, Counter())
            entry["labelled"] += c.get("labelled", 0)
            entry["found_label"] += c.get("found", 0)
    rows = [
        "| rule | findings (dir) | notes (dir) | judged | real | advice | false | precision | TP labels | found (dir) "
        "| recall |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for rule, c in sorted(counts.items()):
        judged = c["real"] + c["advice"] + c["false"]
        rows.append(
            f"| `{rule}` | {c['findings']} | {c['notes']} | {judged} | {c['real']} | {c['advice']} | {c['false']} "
            f"| {_percent(c['real'], judged)} | {c['labelled']} | {c['found_label']} "
            f"| {_percent(c['found_label'], c['labelled'])} |"
        )
    return rows


def comparison(summary: dict[str, Any]) -> list[str]:
    rows = [
        "| app | blocking TPs | doctor | ruff ASYNC | ty-async | doctor only | ruff only | ty-async only | none "
        "| findings (doctor `blocking-call` / ruff / ty-async) | negatives hit (doctor / ruff / ty-async) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    details = []
    for a in summary["apps"]:
        blocking = set(a["blocking_tps"])
        doctor = blocking & set(a["found"]["doctor-directory"])
        ruff = blocking & set(a["found"]["ruff"])
        ty = blocking & set(a["found"]["ty-async"])
        only = {"doctor": doctor - ruff - ty, "ruff": ruff - doctor - ty, "ty-async": ty - doctor - ruff}
        none = blocking - doctor - ruff - ty
        hit = a["negatives_hit"]
        blocking_findings = a["by_rule"].get("blocking-call", {}).get("findings", 0)
        rows.append(
            f"| {a['app']} | {len(blocking)} | {len(doctor)} | {len(ruff)} | {len(ty)} | {len(only['doctor'])} "
            f"| {len(only['ruff'])} | {len(only['ty-async'])} | {len(none)} "
            f"| {blocking_findings} / {a['findings']['ruff']} / {a['findings']['ty-async']} "
            f"| {len(hit['doctor-directory'])} / {len(hit['ruff'])} / {len(hit['ty-async'])} |"
        )
        parts = [f"{tool} only: {', '.join(sorted(ids))}" for tool, ids in only.items() if ids]
        if none:
            parts.append(f"none: {', '.join(sorted(none))}")
        if parts:
            details.append(f"- {a['app']}: " + "; ".join(parts) + ".")
    return [*rows, "", *details]


def render(summary: dict[str, Any]) -> str:
    doctor_path = summary.get("doctor_path", "src/tenk/doctor")
    head = (
        f"Run `{summary['run']}`: tenk at commit `{summary['commit']}` ({doctor_path} tree "
        f"`{summary['doctor_tree']}`), {summary['date']}; a seeded draw of "
        f"{summary['sample']} directory-mode findings an app (seed {summary['seed']}); {summary['ruff']}; "
        f"`{summary['ty_async']['package']}` with `--async200-stdlib --async200-transitive`."
    )
    out = [
        head,
        "",
        *per_app(summary),
        "",
        "By rule, all apps together:",
        "",
        *per_rule(summary),
        "",
        "Blocking calls (labels of category `blocking-call`) found by each tool:",
        "",
        *comparison(summary),
    ]
    return "\n".join(out) + "\n"


def write_table(summary: dict[str, Any], path: Path) -> str:
    text = render(summary)
    path.write_text(text)
    return text


def markers(app_set: str) -> tuple[str, str]:
    """The two comments of docs/doctor.md between which a set's tables are written."""
    if app_set == "development":
        return (
            "<!-- doctor-eval tables: written by python -m benchmarks.doctor_eval.score --docs -->",
            "<!-- doctor-eval tables: end -->",
        )
    command = f"python -m benchmarks.doctor_eval.score --set {app_set} --docs"
    return f"<!-- doctor-eval {app_set} tables: written by {command} -->", f"<!-- doctor-eval {app_set} tables: end -->"


def write_docs(summary: dict[str, Any], page: Path, app_set: str = "development") -> None:
    """Put the tables between the set's two markers in docs/doctor.md, leaving the prose around them."""
    begin, end = markers(app_set)
    text = page.read_text()
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise SystemExit(f"{page} has no {begin!r} ... {end!r} block to write the tables into")
    page.write_text(text[: start + len(begin)] + "\n\n" + render(summary) + "\n" + text[stop:])
