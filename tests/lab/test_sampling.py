"""Server figures: the target's own CPU, and how busy other processes kept the target's CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from tenk.lab.measuring.sampling import TreeSampler, wait_until_idle
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


# A parent that forks one short-lived child after another, each spinning 20 ms and exiting: a Postgres
# postmaster serving a connection opened per request, whose backends each live a few milliseconds.
FORKING = """
import os, time
end = time.monotonic() + 30
while time.monotonic() < end:
    pid = os.fork()
    if pid == 0:
        stop = time.monotonic() + 0.02
        while time.monotonic() < stop:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_children_that_exit_between_samples_are_counted_through_the_parent_that_reaped_them() -> None:
    """Sampled each half second, none of these children is seen for more than a moment of its life: the
    baselines' Postgres read near-zero CPU a request for a connection opened per request."""
    forker = subprocess.Popen([sys.executable, "-c", FORKING])
    try:
        reaped_before, started = sum(psutil.Process(forker.pid).cpu_times()[2:4]), time.monotonic()
        with TreeSampler(forker.pid, interval_s=0.5, known=lambda: {"postgres": forker.pid}) as sampler:
            time.sleep(2.2)
        # What the children really got: on a busy machine they may get far less than a core.
        children_cores = (sum(psutil.Process(forker.pid).cpu_times()[2:4]) - reaped_before) / (
            time.monotonic() - started
        )
    finally:
        forker.kill()
        forker.wait()
    assert children_cores > 0.05
    assert sampler.stats.cpu_cores_mean is not None
    assert sampler.stats.cpu_cores_mean >= 0.7 * children_cores  # as the target
    assert sampler.stats.roles_cores_mean["postgres"] >= 0.7 * children_cores  # as a dependency


def _spinning_then_idle(busy_s: float) -> subprocess.Popen[bytes]:
    code = f"import time\nend = time.monotonic() + {busy_s}\nwhile time.monotonic() < end: pass\ntime.sleep(120)"
    return subprocess.Popen([sys.executable, "-c", code])


def test_after_an_overload_the_next_step_waits_until_the_target_has_worked_off_its_queue() -> None:
    # A target allowed half a core (a spinner takes more, even on a loaded machine) still serving what an
    # overload queued (here: 1.5 s of spinning) is waited for; an idle one is not held up past one
    # measuring window; one that never settles, only until the timeout.
    working = _spinning_then_idle(1.5)
    idle = _spinning_then_idle(0.0)
    forever = _spinning_then_idle(600.0)
    try:
        started = time.monotonic()
        waited = wait_until_idle(lambda: [working.pid], cores=0.5, timeout_s=60)
        assert time.monotonic() - started >= 1.0, "returned while the target was still busy"
        assert waited < 60, "the busy spell ended long before the timeout"
        # Once idle (its Python started), the idle one needs a single window.
        eventually_blocking(lambda: psutil.Process(idle.pid).status() == psutil.STATUS_SLEEPING, 30, "an idle child")
        assert wait_until_idle(lambda: [idle.pid], cores=0.5, timeout_s=60) < 5
        assert 1.0 <= wait_until_idle(lambda: [forever.pid], cores=0.5, timeout_s=1.0) < 10
    finally:
        for child in (working, idle, forever):
            child.kill()
            child.wait()
