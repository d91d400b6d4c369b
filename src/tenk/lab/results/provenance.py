"""Where a result came from: the machine, the software and the pinning, so that two results can be
told apart before they are compared. `compare` warns when these differ."""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import psutil

from tenk.lab.cpus import other_cpus
from tenk.lab.definition.ladder import Ladder, Rung
from tenk.lab.documents import BudgetProvenance, Pinning, Provenance

PACKAGES = ("tenk", "granian", "uvicorn", "gunicorn", "fastapi", "starlette", "asyncpg", "redis", "uvloop")
# What must match for two runs to be comparable without a warning.
COMPARABLE = ("machine.cpu_model", "machine.cores", "machine.memory_gb", "machine.kernel", "software.python",
              "software.packages", "software.k6")  # fmt: skip


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def k6_version() -> str:
    from tenk.lab.driving.k6 import k6_binary
    from tenk.lab.errors import LabError

    try:
        text = _run([k6_binary(), "version"])
    except LabError:
        return ""
    return text.splitlines()[0] if text else ""


def _pinning(rung: Rung) -> Pinning:
    config = rung.config
    if config.cpu_budget in ("", "none"):
        return {"target_cpus": config.cpus}
    return {
        "target_cpus": config.cpus,
        "cpu_budget": config.cpu_budget,
        "dependency_cpus": config.cpus,
        "generator_cpus": other_cpus(config.cpus) or "",
    }


def provenance(ladder: Ladder, env: Mapping[str, str], budget: BudgetProvenance | None = None) -> Provenance:
    record: Provenance = {
        "machine": {
            "cpu_model": _cpu_model(),
            "cores": psutil.cpu_count(logical=True),
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "kernel": platform.release(),
            "hostname": platform.node(),
        },
        "software": {
            "python": platform.python_version(),
            "implementation": sys.implementation.name,
            "packages": _versions(),
            "k6": k6_version(),
            "git_sha": _run(["git", "rev-parse", "HEAD"]),
            "git_dirty": bool(_run(["git", "status", "--porcelain", "--untracked-files=no"])),
        },
        "pinning": {rung.label: _pinning(rung) for rung in ladder.rungs},
        "env": {k: v for k, v in env.items() if k.startswith("TENK_") and "KEY" not in k and "URL" not in k},
    }
    if budget:
        record["cpu_budget"] = budget
    return record


def _flat(data: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name not in COMPARABLE:
            out.update(_flat(value, name + "."))
        else:
            out[name] = value
    return out


def differences(a: Provenance, b: Provenance) -> list[str]:
    """What differs between two results' provenance, among what must match to compare them."""
    if not a or not b:
        return ["one result records no provenance (made before tenk recorded it): machine and versions unknown"]
    fa, fb = _flat(a), _flat(b)
    return [f"{key}: {fa.get(key)!r} vs {fb.get(key)!r}" for key in COMPARABLE if fa.get(key) != fb.get(key)]
