"""`tenk lab compare --fail-on-regression` catches a planted 20 % CPU regression on a real target,
and passes the same target unchanged: the gate the example CI workflow (docs/examples/lab-gate.yml) runs.

Real k6 and a real uvicorn target (tests/lab/spin_app.py) burning SPIN_MS of CPU a request; the plant
is 12 ms instead of 10. The gate reads the target's CPU ms per request, which the kernel counts
whatever else the machine is doing, so it holds on a busy 2-core box.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tenk.cli import main
from tenk.lab.definition.ladder import load_ladder
from tenk.lab.measuring.options import RunOptions
from tenk.lab.results.record import run_ladder
from tests.lab.test_capacity import lab_env, mix_file

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core for the target and one for the rest"),
]
TARGET_CPU = sorted(os.sched_getaffinity(0))[0]


def run_spin(tmp_path: Path, name: str, spin_ms: int) -> Path:
    """Five interleaved repeats of one light rung: 20 req/s of `spin_ms` each is under half a core.

    Five, not three: with three a side the interval's low end is about the slowest base repeat over
    the fastest planted one, so one noisy repeat on a busy CI machine sank a real 19 % regression
    below the 10 % gate (1.088x low, CI of 2026-11-27). Five seconds a repeat, so that the CPU
    clock's 10 ms ticks are a small part of what each repeat measures.
    """
    folder = tmp_path / name
    folder.mkdir()
    mix_file(folder)
    path = folder / "spin.toml"
    path.write_text(
        f"""
name = "spin"
repeats = 5
[defaults]
target = "tests.lab.spin_app:app"
server = "uvicorn"
cpus = "{TARGET_CPU}"
mix = "work.toml"
rate = 20
duration_s = 5
warmup_s = 0
slo_p99_ms = 1000
[defaults.env]
SPIN_WHERE = "app"
SPIN_MS = "{spin_ms}"
[[rung]]
label = "spin"
"""
    )
    return run_ladder(load_ladder(path), RunOptions(results_root=folder / "results", base_env=lab_env()))


def test_the_gate_fails_on_a_planted_20_percent_cpu_regression_and_passes_without_it(tmp_path: Path) -> None:
    base = run_spin(tmp_path, "base", 10)
    planted = run_spin(tmp_path, "planted", 12)
    same = run_spin(tmp_path, "same", 10)
    runner = CliRunner()
    caught = runner.invoke(main, ["lab", "compare", str(base), str(planted), "--fail-on-regression"])
    assert caught.exit_code == 1, caught.output
    assert "regression >= 10%: spin: target CPU ms/request worse: " in caught.output
    passed = runner.invoke(main, ["lab", "compare", str(base), str(same), "--fail-on-regression"])
    assert passed.exit_code == 0, passed.output
    assert "no statistically supported regression of 10% or more" in passed.output
