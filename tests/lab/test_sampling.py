"""Server figures: the target's own CPU, and how busy other processes kept the target's CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from tenk.lab.measuring.sampling import TreeSampler
from tests.support.waiting import eventually_blocking

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"
CPU = max(os.sched_getaffinity(0))


def test_a_busy_neighbour_on_the_target_cpu_is_reported_and_not_counted_as_the_target() -> None:
    target = subprocess.Popen(["taskset", "-c", str(CPU), sys.executable, "-c", "import time; time.sleep(30)"])
    neighbour = subprocess.Popen(["taskset", "-c", str(CPU), sys.executable, "-c", SPIN])
    try:
        with TreeSampler(target.pid, {CPU}, interval_s=0.5) as sampler:
            time.sleep(2.2)
    finally:
        for process in (target, neighbour):
            process.kill()
            process.wait()
    stats = sampler.stats
    assert len(stats.series) >= 3
    assert stats.cpu_cores_mean is not None
    assert stats.neighbour_cores_mean is not None
    assert stats.cpu_cores_mean < 0.05  # the sleeping target
    assert stats.neighbour_cores_mean > 0.5  # the spinning neighbour had the core


def test_the_target_tree_cpu_includes_its_children() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {SPIN!r}])"]
    )
    try:
        (child,) = eventually_blocking(
            lambda: psutil.Process(parent.pid).children(), 30, "the spinning child to start", every=0.05
        )
        spent_before, started = sum(child.cpu_times()[:2]), time.monotonic()
        with TreeSampler(parent.pid, interval_s=0.5) as sampler:
            time.sleep(2.2)
        # What the child really got: on a busy machine a spinning process may get far less than a core.
        child_cores = (sum(child.cpu_times()[:2]) - spent_before) / (time.monotonic() - started)
    finally:
        for proc in psutil.Process(parent.pid).children(recursive=True):
            proc.kill()
        parent.kill()
        parent.wait()
    assert child_cores > 0.02
    assert sampler.stats.cpu_cores_mean is not None
    assert sampler.stats.cpu_cores_mean >= 0.7 * child_cores  # the child's CPU is counted as the target's
    assert sampler.stats.processes == 2
