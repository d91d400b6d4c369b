"""Score `tenk doctor` (and ruff's ASYNC rules and ty-async) on the pinned apps against the hand labels.

    python -m benchmarks.doctor_eval.score [--set development|heldout|heldout2|heldout3|heldout4] [--app NAME ...]
                                           [--run NAME] [--rescore]

For each app (fetched first with `python -m benchmarks.doctor_eval.fetch`) it runs doctor on the
target folder and on the `module:app` entry, ruff `--select ASYNC` and ty-async's transitive mode, and
keeps their findings under runs/RUN/findings/. Then:

- recall: of the app's TP labels, those doctor reports at the labelled place under the labelled rule
  (each mode apart); ruff and ty-async are credited for a `blocking-call` label at their finding's
  place (ty-async's transitive findings are read at the sink they name);
- precision: a seeded random draw of up to --sample directory-mode findings a app (random.Random
  seeded with "SEED:APP" over the findings in doctor's order); each is judged by the TP label it
  matches (real), the negative it matches (false), or judgments/APP.toml (real, advice or false, with
  a reason). Advice counts against precision: it is not a defect at that line. Drawn findings nobody
  has judged go to runs/RUN/to_label/APP.toml and are left out of the figure, which says how many;
- notes: what doctor itself reports as a `note` (advice about the app: no served request pays for the
  line) is neither drawn nor credited for recall; the tables count notes apart.

It writes runs/RUN/summary.json and runs/RUN/table.md, and with --docs the same tables into
docs/doctor.md between the set's markers. `--set heldout` scores the held-out apps (heldout.toml),
into runs/heldout-main-<commit>/ unless --run names another folder, and writes their own block of
docs/doctor.md. With --rescore it re-reads the stored findings instead of running the tools: judge
the drawn findings in to_label/, append them to judgments/, then rescore.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.doctor_eval.apps import HERE, REPO, SETS, App, load_set, select
from benchmarks.doctor_eval.labels import (
    Finding,
    Judgment,
    Label,
    blocking_match,
    doctor_match,
    load_judgments,
    load_labels,
    read_jsonl,
    to_label_document,
    write_jsonl,
)
from benchmarks.doctor_eval.markdown import write_docs, write_table
from benchmarks.doctor_eval.tools import TY_ASYNC, TY_ASYNC_PATTERNS, ruff_version, run_doctor, run_ruff, run_ty_async

RUNS = HERE / "runs"
# Where doctor's package is in the repository; a run scored before it moved to its own distribution names no
# path, and its tree is the old one's.
DOCTOR_PATH = "packages/tenk-doctor/src/tenk/doctor"
OLD_DOCTOR_PATH = "src/tenk/doctor"
SOURCES = ("doctor-directory", "doctor-module", "ruff", "ty-async")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def collect(app: App, run_dir: Path) -> dict[str, Any]:
    """Run the four tools on the app, store their findings and what doctor said of its run."""
    meta: dict[str, Any] = {}
    for mode in ("directory", "module"):
        if mode == "module" and not app.entry:
            continue
        run = run_doctor(app, mode)
        write_jsonl(run_dir / "findings" / f"{app.name}.doctor-{mode}.jsonl", run.findings)
        meta[mode] = {k: v for k, v in dataclasses.asdict(run).items() if k != "findings"}
    write_jsonl(run_dir / "findings" / f"{app.name}.ruff.jsonl", run_ruff(app))
    write_jsonl(run_dir / "findings" / f"{app.name}.ty-async.jsonl", run_ty_async(app))
    (run_dir / "meta").mkdir(parents=True, exist_ok=True)
    (run_dir / "meta" / f"{app.name}.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def _stored(run_dir: Path, app: App, source: str, *, notes: bool = False) -> list[Finding]:
    """A tool's stored findings: without doctor's notes, or only those (`notes=True`)."""
    path = run_dir / "findings" / f"{app.name}.{source}.jsonl"
    found = read_jsonl(path) if path.exists() else []
    return [f for f in found if f.is_note == notes]


def _hop(text: str) -> str:
    return text.split(" ", 1)[0]


def draw(app: App, findings: list[Finding], size: int, seed: int) -> list[Finding]:
    if len(findings) <= size:
        return list(findings)
    rng = random.Random(f"{seed}:{app.name}")
    picked = sorted(rng.sample(range(len(findings)), size))
    return [findings[i] for i in picked]


def judge(finding: Finding, labels: list[Label], judgments: dict[str, Judgment]) -> tuple[str, str] | None:
    label = doctor_match(finding, labels)
    if label is not None:
        verdict = "real" if label.verdict == "TP" else "false"
        return verdict, f"label {label.id}: {label.why}"
    judgment = judgments.get(finding.key)
    if judgment is not None:
        return judgment.verdict, judgment.reason
    return None


def score_app(app: App, run_dir: Path, sample: int, seed: int) -> dict[str, Any]:
    labels = load_labels(app.name)
    tps = [label for label in labels if label.verdict == "TP"]
    negatives = [label for label in labels if label.verdict == "negative"]
    judgments = load_judgments(app.name)
    meta = json.loads((run_dir / "meta" / f"{app.name}.json").read_text())
    found: dict[str, set[str]] = {}
    negatives_hit: dict[str, list[str]] = {}
    for source in SOURCES:
        findings = _stored(run_dir, app, source)
        match = doctor_match if source.startswith("doctor") else blocking_match
        hits = {m.id for f in findings if (m := match(f, labels)) is not None}
        found[source] = {label.id for label in tps if label.id in hits}
        negatives_hit[source] = sorted(label.id for label in negatives if label.id in hits)

    directory = _stored(run_dir, app, "doctor-directory")
    # Doctor keeps the shortest chain from any entry point, so another route reaching the same call is
    # no miss; this says how often it shows the path the label was read along.
    chained = [(f, label) for f in directory if f.chain and (label := doctor_match(f, tps)) is not None]
    same_entry = [label.id for f, label in chained if _hop(f.chain[0]) == _hop(label.chain[0])]
    drawn = draw(app, directory, sample, seed)
    judged: list[dict[str, Any]] = []
    unjudged: list[Finding] = []
    for finding in drawn:
        verdict = judge(finding, labels, judgments)
        if verdict is None:
            unjudged.append(finding)
        else:
            judged.append({"rule": finding.rule, "key": finding.key, "verdict": verdict[0], "reason": verdict[1]})
    to_label = run_dir / "to_label" / f"{app.name}.toml"
    if unjudged:
        to_label.parent.mkdir(parents=True, exist_ok=True)
        to_label.write_text(to_label_document(app.name, unjudged))
    elif to_label.exists():
        to_label.unlink()
    verdicts = Counter(j["verdict"] for j in judged)
    by_rule: dict[str, dict[str, int]] = {}
    for finding in directory:
        by_rule.setdefault(finding.rule, Counter())["findings"] += 1
    for finding in _stored(run_dir, app, "doctor-directory", notes=True):
        by_rule.setdefault(finding.rule, Counter())["notes"] += 1
    for j in judged:
        by_rule.setdefault(j["rule"], Counter())[j["verdict"]] += 1
    for finding in unjudged:
        by_rule.setdefault(finding.rule, Counter())["unjudged"] += 1
    recall_by_category: dict[str, dict[str, int]] = {}
    for label in tps:
        entry = recall_by_category.setdefault(label.category, Counter())
        entry["labelled"] += 1
        entry["found"] += label.id in found["doctor-directory"]
        entry["found_module"] += label.id in found["doctor-module"]
    return {
        "app": app.name,
        "version": app.version,
        "target": app.target,
        "entry": app.entry,
        "orm": app.orm,
        "kind": app.kind,
        "doctor": meta,
        "findings": {source: len(_stored(run_dir, app, source)) for source in SOURCES},
        "notes": {source: len(_stored(run_dir, app, source, notes=True)) for source in SOURCES[:2]},
        "labels": {"tp": len(tps), "negative": len(negatives)},
        "found": {source: sorted(ids) for source, ids in found.items()},
        "negatives_hit": negatives_hit,
        "blocking_tps": sorted(label.id for label in tps if label.category == "blocking-call"),
        "sample": {
            "drawn": len(drawn),
            "real": verdicts["real"],
            "advice": verdicts["advice"],
            "false": verdicts["false"],
            "unjudged": len(unjudged),
        },
        "judged": judged,
        "by_rule": {rule: dict(counts) for rule, counts in sorted(by_rule.items())},
        "recall_by_category": {c: dict(counts) for c, counts in sorted(recall_by_category.items())},
        "same_entry": sorted(set(same_entry)),
        "chained": sorted({label.id for _, label in chained}),
        "missed": sorted(label.id for label in tps if label.id not in found["doctor-directory"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="development", help="which set of apps")
    parser.add_argument("--app", action="append", help="only this app (repeatable)")
    parser.add_argument("--run", help="the run's folder under runs/ (default: main-<commit>, heldout-main-<commit>)")
    parser.add_argument("--rescore", action="store_true", help="re-read stored findings, run no tool")
    parser.add_argument("--sample", type=int, default=40, help="findings drawn an app for precision")
    parser.add_argument("--seed", type=int, default=48)
    parser.add_argument("--docs", action="store_true", help="also rewrite the tables in docs/doctor.md")
    args = parser.parse_args(argv)
    commit = _git("rev-parse", "--short=12", "HEAD")
    # The tree of doctor's package: two runs with the same one ran the same doctor.
    doctor_tree = _git("rev-parse", "--short=12", f"HEAD:{DOCTOR_PATH}")
    prefix = "" if args.set == "development" else f"{args.set}-"
    run_dir = RUNS / (args.run or f"{prefix}main-{commit}")
    apps = select(load_set(args.set), args.app)
    summary_path = run_dir / "summary.json"
    previous = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    if not args.rescore:
        for app in apps:
            if not app.root.exists():
                raise SystemExit(
                    f"{app.name} is not fetched: run python -m benchmarks.doctor_eval.fetch --set {args.set}"
                )
            sys.stderr.write(f"{app.name}: running doctor, ruff and ty-async\n")
            collect(app, run_dir)
    scored = {a["app"]: a for a in previous.get("apps", [])}
    for app in apps:
        scored[app.name] = score_app(app, run_dir, args.sample, args.seed)
    order = [a.name for a in load_set(args.set)]
    summary = {
        "run": run_dir.name,
        "set": args.set,
        "commit": previous.get("commit", commit) if args.rescore else commit,
        "doctor_tree": previous.get("doctor_tree", doctor_tree) if args.rescore else doctor_tree,
        "doctor_path": previous.get("doctor_path", OLD_DOCTOR_PATH) if args.rescore else DOCTOR_PATH,
        "date": previous.get("date") if args.rescore else datetime.date.today().isoformat(),
        "sample": args.sample,
        "seed": args.seed,
        "ruff": previous.get("ruff") if args.rescore else ruff_version(),
        "ty_async": {"package": TY_ASYNC, "patterns": TY_ASYNC_PATTERNS},
        "apps": [scored[name] for name in order if name in scored],
    }
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    table = write_table(summary, run_dir / "table.md")
    if args.docs:
        write_docs(summary, REPO / "docs" / "doctor.md", args.set)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
