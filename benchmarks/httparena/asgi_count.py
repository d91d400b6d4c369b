"""Instructions a request of HttpArena's api paths costs an entry's app, in-process through its ASGI
callable: `python -m benchmarks.httparena.asgi_count` counts every path for tenk's entry and HttpArena's
raw uvicorn and fastapi entries, each in its own environment, and prints the mix-weighted figures.

This is `benchmarks/budget/`'s method (callgrind, its marks library, a fixed hash seed) for the HttpArena
entries: no HTTP server, no client library, the app's own work and its Postgres client's. The driver
half of this file (`--drive`) runs under valgrind in the entry's own interpreter and imports nothing of
tenk's, so the fastapi entry counts on the versions it pins. What the HTTP server itself costs is not in
these counts (`syscalls.py --callgrind` counts whole servers).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.budget.asgi import Requests

Scope = dict[str, Any]
WARM_UP = 200
# (name, method, target, body, chunked): the api-4 templates' requests and the others the entries serve.
PATHS: list[tuple[str, str, str, bytes, bool]] = [
    ("baseline_get", "GET", "/baseline11?a=13&b=42", b"", False),
    ("baseline_post", "POST", "/baseline11?a=13&b=42", b"20", False),
    ("baseline_chunked", "POST", "/baseline11?a=13&b=42", b"20", True),
    ("json_1", "GET", "/json/1?m=3", b"", False),
    ("json_50", "GET", "/json/50?m=1", b"", False),
    ("async_db_50", "GET", "/async-db?min=10&max=50&limit=50", b"", False),
]
# The api-4 mix: 3 `get`, 3 `json-get` (/json/50?m=1), 2 `async-db-get` (limit=50).
MIX = {"baseline_get": 3, "json_50": 3, "async_db_50": 2}


def _scope(method: str, target: str, body: bytes, chunked: bool) -> Scope:
    path, _, query = target.partition("?")
    headers = [(b"host", b"localhost:8080")]
    if body:
        headers.append((b"transfer-encoding", b"chunked") if chunked else (b"content-length", b"%d" % len(body)))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }


async def _lifespan(app: Any) -> Callable[[], Any]:
    """Start the app's lifespan; returns what ends it."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    started = await outbox.get()
    if started["type"] != "lifespan.startup.complete":
        raise SystemExit(f"lifespan: {started}")

    async def stop() -> None:
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await task

    return stop


async def _drive(folder: Path, name: str, count: int, marks: Any) -> None:
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("app", folder / "app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app = module.app
    _, method, target, body, chunked = next(path for path in PATHS if path[0] == name)
    scope = _scope(method, target, body, chunked)
    stop = await _lifespan(app)
    client = Requests(app, 200)
    for _ in range(WARM_UP):
        await client.one(scope, body)
    marks.tenk_measure_start()
    for _ in range(count):
        await client.one(scope, body)
    marks.tenk_measure_stop()
    await stop()


def drive_main(argv: list[str]) -> None:
    import uvloop  # the entries' own loop: in every environment here

    folder, name, count = Path(argv[0]), argv[1], int(argv[2])
    marks = ctypes.CDLL(os.environ["TENK_CALLGRIND_MARKS"])
    uvloop.run(_drive(folder, name, count, marks))


def main() -> None:
    from benchmarks.bench_budget import _instructions, _marks
    from benchmarks.bench_httparena import arena_postgres, entry_env, static_dir
    from benchmarks.httparena.entries import VENV_BIN, entries

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("entries", nargs="*", default=["tenk", "uvicorn", "fastapi"])
    parser.add_argument("--paths", nargs="*", default=[path[0] for path in PATHS])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    import tempfile

    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="httparena-asgi-count-") as folder:
        workdir = Path(folder)
        marks = _marks(workdir)
        with arena_postgres(workdir) as dsn, static_dir():  # the fastapi entry mounts /data/static
            env = {**entry_env(dsn, workdir), "TENK_WORKERS": "1", "PYTHONHASHSEED": "0"}
            env["TENK_CALLGRIND_MARKS"] = str(marks)
            for name in args.entries:
                entry = entries()[name]
                entry.prepare()
                python = VENV_BIN / "python" if name == "tenk" else entry.venv / "bin" / "python"
                figures[name] = {}
                for path in args.paths:
                    dump = workdir / f"callgrind-{name}-{path}"
                    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={dump}"]
                    argv += [str(python), str(Path(__file__)), "--drive", str(entry.folder), path, str(args.count)]
                    done = subprocess_run(argv, env)
                    if done:
                        raise SystemExit(f"{name} {path}: {done}")
                    figures[name][path] = _instructions(dump) / args.count
                    print(f"{name} {path}: {figures[name][path]:,.0f}", file=sys.stderr, flush=True)
    for paths in figures.values():
        if all(path in paths for path in MIX):
            paths["api4_mix"] = sum(paths[path] * weight for path, weight in MIX.items()) / sum(MIX.values())
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def subprocess_run(argv: list[str], env: dict[str, str]) -> str:
    """Run one counted driver; what went wrong, or ''."""
    import subprocess

    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=Path(__file__).parents[2])
    return "" if done.returncode == 0 else done.stderr[-2000:]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--drive"]:
        drive_main(sys.argv[2:])
    else:
        main()
