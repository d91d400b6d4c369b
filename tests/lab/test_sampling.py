"""Server figures: the target's own CPU, and how busy other processes kept the target's CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from tenk.lab.sampling import TreeSampler

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
    assert stats.cpu_cores_mean < 0.05  # the sleeping target
    assert stats.neighbour_cores_mean > 0.5  # the spinning neighbour had the core


def test_the_target_tree_cpu_includes_its_children() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {SPIN!r}])"]
    )
    try:
        time.sleep(0.5)
        with TreeSampler(parent.pid, interval_s=0.5) as sampler:
            time.sleep(2.2)
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()
    assert sampler.stats.cpu_cores_mean > 0.3
    assert sampler.stats.processes == 2
