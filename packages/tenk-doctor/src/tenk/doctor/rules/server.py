"""access-log, h11-parser, no-uvloop and one-worker: how the app is served, where that can be read.

Sources: `uvicorn.run(...)` in the code; in the target directory, Dockerfiles' CMD and ENTRYPOINT, a
Procfile, compose files' `command`, and `gunicorn.conf.py`. uvicorn picks httptools and uvloop itself
when they are installed, so an unset `--http`/`--loop` is flagged only when the project's requirements
(pyproject.toml, requirements*.txt) are readable and name neither them nor `uvicorn[standard]`. A single
worker is flagged only where the deployment says it has more cores (a compose service's `cpus`).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tenk.doctor._context import Context
from tenk.doctor._findings import Finding

SERVERS = ("uvicorn", "gunicorn", "fastapi")
QUIET_LEVELS = {"warning", "error", "critical"}


@dataclass(frozen=True)
class ServerRun:
    """One way the app is started, as far as its source says."""

    path: Path
    line: int
    code: str
    server: str
    workers: int | None = None
    http: str | None = None
    loop: str | None = None
    access_log: bool | None = None
    log_level: str | None = None
    worker_class: str | None = None
    # Cores the deployment gives this process, where it says.
    cores: float | None = None

    @property
    def access_log_on(self) -> bool:
        if self.server == "gunicorn":
            return bool(self.access_log)
        return self.access_log is not False and (self.log_level or "info") not in QUIET_LEVELS

    @property
    def uses_h11(self) -> bool:
        return self.http == "h11" or (self.worker_class or "").endswith("UvicornH11Worker")


def check(context: Context) -> Iterator[Finding]:
    requirements = _requirements(context.target.config_dir)
    for run in server_runs(context):
        yield from _judge(run, requirements)


def _judge(run: ServerRun, requirements: str | None) -> Iterator[Finding]:
    def found(rule: str, message: str) -> Finding:
        return Finding(rule, run.path, run.line, 1, run.code, message)

    if run.access_log_on:
        yield found("access-log", f"{run.server} writes an access log line per request")
    standard = requirements is not None and re.search(r"(uvicorn|fastapi)\[[^\]]*standard", requirements) is not None
    if run.uses_h11:
        yield found("h11-parser", f"{run.server} parses HTTP with h11 (pure Python)")
    elif _unnamed(run, run.http, requirements, standard, "httptools"):
        yield found("h11-parser", f"{run.server} will fall back to h11: the requirements name no httptools")
    if run.loop == "asyncio":
        yield found("no-uvloop", f"{run.server} runs asyncio's default loop (--loop asyncio)")
    elif _unnamed(run, run.loop, requirements, standard, "uvloop"):
        yield found("no-uvloop", f"{run.server} will fall back to asyncio's loop: the requirements name no uvloop")
    if (run.workers or 1) == 1 and run.cores is not None and run.cores >= 2:
        yield found("one-worker", f"{run.server} runs 1 worker where the deployment gives {run.cores:g} cores")


def _unnamed(run: ServerRun, option: str | None, requirements: str | None, standard: bool, package: str) -> bool:
    """uvicorn left to pick (`auto`) where the readable requirements do not install `package`."""
    if run.server == "gunicorn" or option not in (None, "auto") or requirements is None:
        return False
    return not standard and package not in requirements


def server_runs(context: Context) -> list[ServerRun]:
    runs: list[ServerRun] = []
    for call in context.calls:
        # `uvicorn.run(**options)`: what it sets cannot be read, so nothing is said about it.
        if call.callee in ("uvicorn.run", "uvicorn.main.run") and all(kw.arg for kw in call.node.keywords):
            runs.append(_uvicorn_run(call.module.path, call.node, call.module.code(call.node.lineno)))
    directory = context.target.config_dir
    if directory is None or not directory.is_dir():
        return runs
    for path in sorted(directory.glob("*")):
        name = path.name.lower()
        if not path.is_file():
            continue
        if name.startswith("dockerfile") or name.endswith(".dockerfile") or name == "containerfile":
            runs.extend(_dockerfile(path))
        elif name == "procfile":
            runs.extend(_procfile(path))
        elif re.fullmatch(r"(docker-)?compose(\.[\w-]+)?\.ya?ml", name):
            runs.extend(_compose(path))
        elif name == "gunicorn.conf.py":
            runs.extend(_gunicorn_conf(path))
    return runs


def _constant(node: ast.expr | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def _uvicorn_run(path: Path, node: ast.Call, code: str) -> ServerRun:
    keywords = {kw.arg: _constant(kw.value) for kw in node.keywords if kw.arg}
    workers = keywords.get("workers")
    return ServerRun(
        path,
        node.lineno,
        code,
        "uvicorn",
        workers=workers if isinstance(workers, int) else None,
        http=keywords.get("http"),
        loop=keywords.get("loop"),
        access_log=keywords.get("access_log"),
        log_level=keywords.get("log_level"),
    )


def parse_command(argv: list[str], path: Path, line: int, code: str, cores: float | None = None) -> ServerRun | None:
    """A server command line (`uvicorn app:app --workers 2`, `gunicorn -k ...`, `fastapi run`)."""
    index = next((i for i, token in enumerate(argv) if Path(token).name in SERVERS), None)
    if index is None:
        return None
    server = Path(argv[index]).name
    options: dict[str, str | bool] = {}
    tokens = argv[index + 1 :]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("-"):
            key, eq, value = token.partition("=")
            takes_value = key in (
                "--workers",
                "-w",
                "--http",
                "--loop",
                "--log-level",
                "-k",
                "--worker-class",
                "--access-logfile",
                "-c",
                "--config",
            )
            if eq:
                options[key] = value
            elif takes_value and i + 1 < len(tokens):
                options[key] = tokens[i + 1]
                i += 1
            else:
                options[key] = True
        i += 1

    def text(*keys: str) -> str | None:
        value = next((options[k] for k in keys if k in options), None)
        return value if isinstance(value, str) else None

    workers = text("--workers", "-w")
    access: bool | None = None
    if server == "gunicorn":
        logfile = text("--access-logfile")
        access = logfile is not None and logfile != "/dev/null"
    elif "--no-access-log" in options:
        access = False
    return ServerRun(
        path,
        line,
        code,
        server,
        workers=int(workers) if workers and workers.isdigit() else None,
        http=text("--http"),
        loop=text("--loop"),
        access_log=access,
        log_level=text("--log-level"),
        worker_class=text("-k", "--worker-class"),
        cores=cores,
    )


def _dockerfile(path: Path) -> Iterator[ServerRun]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    entrypoint: list[str] = []
    i = 0
    while i < len(lines):
        start = i
        text = lines[i]
        while text.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        match = re.match(r"\s*(CMD|ENTRYPOINT)\s+(.*)", text, re.IGNORECASE)
        if not match:
            continue
        argv = _argv(match.group(2))
        if match.group(1).upper() == "ENTRYPOINT":
            entrypoint = argv
        run = parse_command(
            [*entrypoint, *argv] if match.group(1).upper() == "CMD" else argv, path, start + 1, lines[start].strip()
        )
        if run is not None:
            yield run


def _argv(text: str) -> list[str]:
    text = text.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            return [str(item) for item in parsed]
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _procfile(path: Path) -> Iterator[ServerRun]:
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        name, colon, command = line.partition(":")
        if colon and not name.strip().startswith("#"):
            run = parse_command(_argv(command), path, number, line.strip())
            if run is not None:
                yield run


def _compose(path: Path) -> Iterator[ServerRun]:
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict):
        return
    lines = text.splitlines()
    for name, service in services.items():
        if not isinstance(service, dict) or "command" not in service:
            continue
        command = service["command"]
        argv = [str(c) for c in command] if isinstance(command, list) else _argv(str(command))
        line = _line_after(lines, f"{name}:", "command")
        run = parse_command(argv, path, line, lines[line - 1].strip() if line else "", _cores(service))
        if run is not None:
            yield run


def _cores(service: dict[str, Any]) -> float | None:
    deploy = service.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    limits = resources.get("limits") if isinstance(resources, dict) else None
    for value in (service.get("cpus"), limits.get("cpus") if isinstance(limits, dict) else None):
        if isinstance(value, str | int | float):
            try:
                return float(value)
            except ValueError:
                continue
    return None


def _line_after(lines: list[str], anchor: str, key: str) -> int:
    start = next((i for i, line in enumerate(lines) if line.strip().startswith(anchor)), 0)
    return next((i + 1 for i in range(start, len(lines)) if lines[i].strip().startswith(f"{key}:")), start + 1)


def _gunicorn_conf(path: Path) -> Iterator[ServerRun]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, ValueError):
        return
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = _constant(node.value)
    accesslog = values.get("accesslog")
    workers = values.get("workers")
    yield ServerRun(
        path,
        1,
        "gunicorn.conf.py",
        "gunicorn",
        workers=workers if isinstance(workers, int) else None,
        access_log=isinstance(accesslog, str) and accesslog != "/dev/null",
        worker_class=values.get("worker_class"),
    )


def _requirements(directory: Path | None) -> str | None:
    if directory is None or not directory.is_dir():
        return None
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(directory.glob("requirements*.txt"))]
    pyproject = directory / "pyproject.toml"
    if pyproject.is_file():
        texts.append(pyproject.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts).lower() if texts else None


def as_configured(runs: list[ServerRun]) -> ServerRun | None:
    """The run a ladder starts from: the first one found (with its deployment's cores if another says)."""
    if not runs:
        return None
    cores = next((run.cores for run in runs if run.cores is not None), None)
    return replace(runs[0], cores=runs[0].cores or cores)
