"""How `tenk lab run` runs a ladder: where results go, which target, what to stream, what to reset."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tenk.lab.measuring.progress import Progress, QuietProgress


@dataclass
class RunOptions:
    results_root: Path = Path("results")
    segment: str = ""
    # A target already running elsewhere (generator-only machines): no processes, no server figures.
    base_url: str | None = None
    base_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    progress: Progress = field(default_factory=QuietProgress)
    repeats: int | None = None  # None: the ladder's `repeats`
    # Fixed-rate runs stream every request from k6 (latency histogram, live per-second view).
    # Off, the generator does less work: compare its CPU both ways to measure what the stream costs.
    stream: bool = True
    # FLUSHDB before each rung repeat. None: only a Redis the lab started itself (never a user's).
    flush_redis: bool | None = None
    # Sample the target's stacks during each measured step (py-spy, `measuring.profiling`), at this rate.
    # Off unless asked (`--profile`, or the ladder's `profile = true`): its cost to the target is measured
    # by benchmarks/profile_cost.py, not assumed.
    profile: bool = False
    profile_rate_hz: int = 100
