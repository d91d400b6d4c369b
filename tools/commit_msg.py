"""Check commit messages against docs/contributing.md: a subject of at most 72 characters, in the
imperative, without a final period, and a blank line before any body.

    python -m tools.commit_msg --message-file .git/COMMIT_EDITMSG   # the commit-msg hook
    python -m tools.commit_msg --since 65af8f1                      # CI: the commits after one

The imperative is checked by the subject's first word, a heuristic: "Add", "Refuse", "Embed" pass;
"Added", "Adding", "Adds", "README:" and "fix" do not. A word the heuristic gets wrong goes in
`_IMPERATIVES_THAT_LOOK_OTHERWISE`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

MAX_SUBJECT = 72
# Imperatives that end as a past tense, a participle or a third person would.
_IMPERATIVES_THAT_LOOK_OTHERWISE = frozenset(
    {
        "Embed", "Feed", "Heed", "Need", "Proceed", "Seed", "Shed", "Speed", "Succeed", "Exceed", "Shred",
        "Bring", "Ring", "Sing", "String", "Swing", "Wring",
        "Access", "Address", "Alias", "Bias", "Bless", "Bypass", "Compress", "Cross", "Discuss", "Dismiss",
        "Express", "Focus", "Guess", "Harness", "Miss", "Pass", "Press", "Process", "Progress", "Stress",
        "Toss", "Canvas", "Redress", "Suppress", "Possess", "Assess", "Caress", "Chess", "Gas", "Mess",
    }
)  # fmt: skip
_WORD = re.compile(r"[A-Z][A-Za-z-]*")


def problems(message: str) -> list[str]:
    """What is wrong with a commit message; empty when nothing is. A merge or a revert is held to the length
    alone: its subject is git's own form, already in the imperative."""
    lines = [line for line in message.lstrip("\n").splitlines() if not line.startswith("#")]
    subject = lines[0] if lines else ""
    if not subject.strip():
        return ["the subject is empty"]
    found = []
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject has {len(subject)} characters, more than {MAX_SUBJECT}: move detail to the body")
    if subject.startswith(("Merge ", "Revert ")):
        return found
    if subject.endswith("."):
        found.append("the subject ends with a period")
    first = subject.split()[0]
    if not _WORD.fullmatch(first):
        found.append(f"the subject opens with {first!r}: open with a capitalised verb in the imperative (no 'area:')")
    elif first not in _IMPERATIVES_THAT_LOOK_OTHERWISE and _not_imperative(first):
        found.append(f"the subject opens with {first!r}: say what the commit does, as 'Add', not 'Added' or 'Adds'")
    if len(lines) > 1 and lines[1].strip():
        found.append("the second line must be blank: the body starts after it")
    return found


def _not_imperative(word: str) -> bool:
    lower = word.lower()
    if lower.endswith(("ed", "ing")):
        return True
    # A third person: "Adds", "Fixes", "Makes"; not "Pass", "Focus" (listed above) or "Cross".
    return lower.endswith("s") and not lower.endswith(("ss", "us", "is"))


def subjects_since(commit: str, head: str = "HEAD") -> list[tuple[str, str]]:
    """(hash, whole message) of each commit after `commit`, up to `head`, merges included."""
    listing = subprocess.run(
        ["git", "log", "--format=%h%x00%B%x00", f"{commit}..{head}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    parts = listing.split("\x00")
    return [(parts[n].strip(), parts[n + 1]) for n in range(0, len(parts) - 1, 2)]


def _report(checked: Iterable[tuple[str, str]]) -> int:
    failed = 0
    for name, message in checked:
        for problem in problems(message):
            print(f"{name}: {problem}\n    {message.splitlines()[0] if message else ''}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--message-file", type=Path, help="a message being committed (the commit-msg hook)")
    where.add_argument("--since", help="check every commit after this one (CI)")
    args = parser.parse_args(argv)
    if args.message_file is not None:
        return _report([("this commit", args.message_file.read_text(encoding="utf-8"))])
    return _report(subjects_since(args.since))


if __name__ == "__main__":
    raise SystemExit(main())
