"""List the lines of an app that match the classic blocking patterns, each with its enclosing function.

    python -m benchmarks.doctor_eval.candidates DIR [--async-only]

This is the grep the labels started from, written without reading doctor: a line is a candidate when
its source matches one of PATTERNS and the call is not awaited. Each is printed as
`path:line [async|sync] Class.function: code`, so a reader can follow a sync one up to its callers by
hand. Being listed here proves nothing: a label is made only after the chain is read.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

PATTERNS: dict[str, str] = {
    "requests": r"\brequests\.(get|post|put|patch|delete|head|request|Session)\b",
    "httpx-sync": r"\bhttpx\.(get|post|put|patch|delete|head|request|stream|Client)\(",
    "urlopen": r"\burlopen\(",
    "time.sleep": r"\btime\.sleep\(|^\s*sleep\(",
    "open": r"(?<![.\w])open\(",
    "path-io": r"\.(read_text|read_bytes|write_text|write_bytes)\(",
    "subprocess": r"\bsubprocess\.|\bos\.(system|popen)\(",
    "shutil": r"\bshutil\.(copy|copy2|copyfile|copytree|move|rmtree|make_archive|unpack_archive)\(",
    "archive": r"\b(zipfile\.ZipFile|tarfile\.open|gzip\.open)\(",
    "boto3": r"\bboto3\.|\.(upload_file|download_file|put_object|get_object|upload_fileobj)\(",
    "smtplib": r"\bsmtplib\.",
    "sync-db": r"\.(query|execute|commit|scalars|scalar|flush|refresh)\(|\bSession\(|\bsessionmaker\(",
    "db-helper": r"\bget_db\(|\bget_session\(|\bwith_session\(",
    "redis-sync": r"\bredis\.(Redis|StrictRedis|from_url)\(",
    "django-orm": r"\.objects\.",
    "middleware": r"BaseHTTPMiddleware|@app\.middleware\(",
    "server": r"--reload|uvicorn\.run\(|workers\s*=\s*1\b",
}


@dataclass(frozen=True)
class Candidate:
    path: Path
    line: int
    kind: str
    function: str
    is_async: bool
    code: str


class _Scopes(ast.NodeVisitor):
    """Maps each line to its innermost enclosing function, and collects the lines of awaited calls."""

    def __init__(self) -> None:
        self.stack: list[tuple[str, bool]] = []
        self.line_scope: dict[int, tuple[str, bool]] = {}
        self.awaited: set[int] = set()
        self.classes: list[str] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, is_async: bool) -> None:
        name = ".".join([*self.classes, *(s[0] for s in self.stack), node.name])
        self.stack.append((name, is_async))
        end = node.end_lineno or node.lineno
        for line in range(node.lineno, end + 1):
            self.line_scope[line] = (name, is_async)
        self.generic_visit(node)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node, False)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node, True)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_Await(self, node: ast.Await) -> None:
        if isinstance(node.value, ast.Call):
            self.awaited.add(node.value.lineno)
        self.generic_visit(node)


def candidates(root: Path) -> list[Candidate]:
    compiled = {kind: re.compile(pattern) for kind, pattern in PATTERNS.items()}
    found: list[Candidate] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        scopes = _Scopes()
        scopes.visit(tree)
        for number, line in enumerate(text.splitlines(), start=1):
            if line.lstrip().startswith("#"):
                continue
            for kind, regex in compiled.items():
                if regex.search(line) and number not in scopes.awaited:
                    function, is_async = scopes.line_scope.get(number, ("<module>", False))
                    found.append(Candidate(path, number, kind, function, is_async, line.strip()))
                    break
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--async-only", action="store_true", help="only lines inside `async def`")
    parser.add_argument("--kind", action="append", help="only these pattern kinds")
    args = parser.parse_args(argv)
    for c in candidates(args.root):
        if args.async_only and not c.is_async:
            continue
        if args.kind and c.kind not in args.kind:
            continue
        where = "async" if c.is_async else "sync"
        sys.stdout.write(f"{c.path}:{c.line} [{where}] {c.kind} {c.function}: {c.code[:140]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
