"""py-spy as the lab starts it: on the generator's CPUs, and a step it cannot sample says why."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tenk.lab.measuring.profiling import StackSampler, py_spy_binary


def test_py_spy_runs_on_the_generators_cpus_and_samples_the_whole_tree(tmp_path: Path) -> None:
    argv = StackSampler(1234, tmp_path, 100, "1").argv("py-spy")
    assert argv[:3] == ["taskset", "-c", "1"]
    assert "--subprocesses" in argv
    # Only threads holding the GIL: a loop waiting in epoll_wait is not CPU spent.
    assert "--gil" in argv
    assert argv[argv.index("--pid") + 1] == "1234"
    assert argv[argv.index("--rate") + 1] == "100"


@pytest.mark.skipif(py_spy_binary() is None, reason="py-spy is not installed")
def test_a_step_py_spy_cannot_sample_says_why_and_raises_nothing(tmp_path: Path) -> None:
    # Not a Python process: py-spy attaches to nothing, as when ptrace is refused.
    other = subprocess.Popen(["sleep", "30"])
    try:
        with StackSampler(other.pid, tmp_path, 100, None) as sampler:
            pass
    finally:
        other.kill()
        other.wait()
    assert sampler.stacks is None
    assert sampler.missing.startswith(("py-spy wrote no samples", "py-spy could not attach")), sampler.missing
