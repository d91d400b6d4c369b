"""A planted CPU regression for the lab gate's campaign (`gate_campaign --gate lab`): tenk's own app, served
through a wrapper that makes each request cost a set fraction more CPU than it does.

How it is calibrated, in the target's own process (one server worker, as the lab's ladders run it):
- the first `SKIP` requests pass untouched (imports, pools and caches warming up);
- over the next `WINDOW` requests, still untouched, it reads the process's CPU time (`time.process_time`:
  every thread of it, the server's own included, as the lab's "target CPU ms a request" counts it) at the
  window's first and last request: their difference over the window's requests is the mean CPU a request
  of the unplanted app;
- from then on every request first spins on the event loop's thread until that thread has used
  `TENK_GATE_PLANT × the mean` more CPU (`time.thread_time`, so a spin the kernel preempts still burns its
  full share: a wall-clock spin would shrink on a busy machine).

The window falls inside a rung's warm-up (5 s at the ladder's fixed rate is several times `SKIP + WINDOW`
requests), so the measured repeats are all planted. The wrapper's own bookkeeping (two clock reads a
request) is part of what B costs; `--trials` of A/A with this wrapper at 0 would show it, the campaign's
A/A trials run CI's unwrapped target.
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenk.lab.documents import load_results
from tenk.lab.results.derivations import cpu_ms_per_request
from tenk.serving import server_argv

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PLANT_ENV = "TENK_GATE_PLANT"
SKIP = 500
WINDOW = 2000
# Paths the lab itself calls (readiness, the metrics scrape): not the mix's requests, so not counted.
NOT_COUNTED = ("/health", "/metrics")


@dataclass
class Calibration:
    """The arithmetic of the plant, apart from any clock: fed the process CPU time at each counted request."""

    fraction: float
    skip: int = SKIP
    window: int = WINDOW
    seen: int = 0
    window_start_s: float = 0.0
    spin_s: float | None = None  # CPU seconds each planted request burns; None while calibrating

    def count(self, cpu_s: float) -> float:
        """Count one request that starts at process CPU time `cpu_s`; the CPU seconds it must burn (0 while
        calibrating). The window's mean is (CPU at its last request - at its first) / the requests between."""
        if self.spin_s is not None:
            return self.spin_s
        self.seen += 1
        if self.seen == self.skip + 1:
            self.window_start_s = cpu_s
        elif self.seen == self.skip + 1 + self.window:
            self.spin_s = self.fraction * (cpu_s - self.window_start_s) / self.window
        return 0.0


def spin(seconds: float) -> None:
    """Burn `seconds` of this thread's CPU time."""
    stop = time.thread_time() + seconds
    while time.thread_time() < stop:
        pass


class Planted:
    """`app`, each request of which first burns the calibrated fraction of a request's mean CPU."""

    def __init__(self, app: ASGIApp, fraction: float) -> None:
        self.app = app
        self.calibration = Calibration(fraction)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(NOT_COUNTED):
            spin(self.calibration.count(time.process_time()))
        await self.app(scope, receive, send)


def planted(app: ASGIApp, fraction: float) -> ASGIApp:
    return Planted(app, fraction) if fraction > 0 else app


def create_app() -> ASGIApp:
    """The server's factory: tenk's app, planted by TENK_GATE_PLANT (a fraction: 0.05 is 5 % more CPU)."""
    from tenk.app import create_app as tenk_app

    return planted(tenk_app(), float(os.environ.get(PLANT_ENV, "0")))


# The ladders of the campaign's two sides.


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def _table(name: str, values: dict[str, Any]) -> list[str]:
    lines = [f"[{name}]"]
    nested = []
    for key, value in values.items():
        if isinstance(value, dict):
            nested.append((f"{name}.{key}", value))
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for sub, inner in nested:
        lines += _table(sub, inner)
    return lines


def planted_command() -> list[str]:
    """The server command the lab would run for target tenk on granian, serving this module's factory instead."""
    argv = server_argv("benchmarks.gate_plant:create_app", "granian", host="127.0.0.1", port=0, workers=1)
    argv[argv.index("--port") + 1] = "{port}"
    argv[argv.index("--workers") + 1] = "{workers}"
    return argv


def planted_ladder(
    source: Path, folder: Path, fraction: float, rungs: int | None = None, duration_s: float | None = None
) -> Path:
    """A copy of the ladder `source` in `folder`: its first `rungs`, each `duration_s` long if given, and,
    for `fraction` > 0, its tenk target served through `create_app` above by the same server command
    (`command`, so the lab still treats the target as tenk: its stack, its seeded data, its /metrics)."""
    ladder = tomllib.loads(source.read_text())
    if rungs:
        ladder["rung"] = ladder["rung"][:rungs]
        ladder.pop("claim", None)  # a claim between two rungs needs both
    defaults = ladder.setdefault("defaults", {})
    if duration_s:
        defaults["duration_s"] = duration_s
    if fraction > 0:
        if defaults.get("target", "tenk") != "tenk" or defaults.get("server", "granian") != "granian":
            raise SystemExit(f"{source}: the plant wraps tenk on granian only")
        defaults["command"] = planted_command()
        env = defaults.setdefault("env", {})
        env[PLANT_ENV] = str(fraction)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    for key, value in ladder.items():
        if not isinstance(value, dict | list):
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in ladder.items():
        if isinstance(value, dict):
            lines += ["", *_table(key, value)]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                lines += ["", f"[[{key}]]", *_table(key, item)[1:]]
    path = folder / source.name
    path.write_text("\n".join(lines) + "\n")
    # The ladder's mix is named, not a file beside it: nothing else to copy.
    return path


def cpu_change(a: Path, b: Path) -> dict[str, float]:
    """B's target CPU ms a request over A's, minus 1, rung by rung (matched by label, as `lab compare` does)."""
    results_a, results_b = load_results(a), load_results(b)
    b_by_label = {rung.label: rung for rung in results_b.rungs}
    changes = {}
    for rung in results_a.rungs:
        other = b_by_label.get(rung.label)
        cpu_a, cpu_b = cpu_ms_per_request(rung), cpu_ms_per_request(other) if other else None
        if cpu_a and cpu_b:
            changes[rung.label] = cpu_b / cpu_a - 1
    return changes
