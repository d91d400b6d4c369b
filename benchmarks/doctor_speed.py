"""How long `tenk doctor` takes on a generated FastAPI app of a given size (CPU only, no services).

    python -m benchmarks.doctor_speed --lines 10000

The app is a package of modules, each with routes, a dependency, helpers that call each other across
modules, pydantic models and a planted blocking call three calls down, so that following calls, the
part that grows with the app, is exercised and not only parsing. Prints the lines, the findings and the
best of `--repeats` timings, with the time `ast.parse` alone takes on the same files for scale.
"""

from __future__ import annotations

import argparse
import ast
import tempfile
import time
from pathlib import Path

MODULE = '''"""Generated module {index}."""

import time

import httpx
from fastapi import APIRouter, Depends
from pydantic import BaseModel

from app import helpers_{next} as other

router = APIRouter()


class Item{index}(BaseModel):
    id: int
    name: str
    price: float
    tags: list[str] = []


def settings_{index}() -> dict:
    return {{"page": 25, "module": {index}}}


def shape_{index}(row: dict) -> dict:
    return {{key: value for key, value in row.items() if not key.startswith("_")}}


def slow_{index}(key: str) -> str:
    time.sleep(0.01)
    return key


def load_{index}(item_id: int) -> dict:
    return shape_{index}({{"id": item_id, "name": "item", "price": 1.0}})
'''

ROUTE = """

@router.get("/m{index}/items{route}/{{item_id}}", response_model=Item{index})
async def get_item_{index}_{route}(item_id: int, settings: dict = Depends(settings_{index})) -> Item{index}:
    row = load_{index}(item_id)
    if item_id < 0:
        other.deep_{next}(str(item_id))
    total = 0
    for step in range(settings["page"]):
        total += step * {route}
    return row


@router.post("/m{index}/items{route}")
async def create_item_{index}_{route}(item: Item{index}) -> dict:
    async with httpx.AsyncClient(timeout=5) as client:
        await client.post("https://audit.example", json={{"id": item.id}})
    return {{"id": item.id, "route": {route}}}
"""

HELPERS = '''"""Generated helpers {index}: a chain three calls deep, ending in a blocking sleep."""

from app import module_{index} as home


def deep_{index}(key: str) -> str:
    return middle_{index}(key)


def middle_{index}(key: str) -> str:
    return home.slow_{index}(key)
'''


def generate(root: Path, lines: int) -> int:
    """Write an app package of about `lines` lines under `root`; return the lines written."""
    package = root / "app"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    written, index = 0, 0
    while written < lines:
        text = MODULE.format(index=index, next=index)
        text += "".join(ROUTE.format(index=index, route=r, next=index) for r in range(10))
        (package / f"module_{index}.py").write_text(text)
        (package / f"helpers_{index}.py").write_text(HELPERS.format(index=index))
        written += text.count("\n") + HELPERS.count("\n")
        index += 1
    return written


def measure(lines: int, repeats: int) -> None:
    from tenk.doctor import diagnose

    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        written = generate(root, lines)
        files = sorted((root / "app").glob("*.py"))
        parse = min(_timed(lambda: [ast.parse(f.read_text()) for f in files]) for _ in range(repeats))
        best, findings = float("inf"), 0
        for _ in range(repeats):
            started = time.perf_counter()
            report = diagnose(str(root / "app"))
            best = min(best, time.perf_counter() - started)
            findings = len(report.findings)
        timing = f"doctor {best:.2f} s (best of {repeats}), ast.parse alone {parse:.2f} s"
        print(f"{written} lines in {len(files)} files: {timing}")
        print(f"{findings} findings, {report.entry_points} entry points")


def _timed(work: object) -> float:
    assert callable(work)
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    measure(args.lines, args.repeats)


if __name__ == "__main__":
    main()
