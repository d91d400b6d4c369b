"""Server figures: the target's own CPU, and how busy other processes kept the target's CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

import psutil

from harness.deadlines import deadline_s
from tenk.lab.measuring.sampling import TreeSampler, wait_until_idle
from tests.support.waiting import eventually_blocking

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"
CPU = max(os.sched_getaffinity(0))
# The sampler needs a few samples to average; at 0.5 s each, the first three come within seconds idle.
SAMPLES = 3
# CPU seconds the measured processes must have spent before a figure is compared with the sampler's: on a
# busy machine a spinner gets a fraction of a core, so the tests wait for this much work, not for a time.
WORK_S = 0.25
# Generous bound for that wait: idle it takes well under a second, and both cores loaded stretch it
# several-fold; only a stuck process or sampler takes a minute.
WITHIN_S = 60


def _sample_until(sampler: TreeSampler, spent: Callable[[], float], what: str) -> None:
    """Let `sampler` run until it has SAMPLES samples and `spent()` reaches WORK_S CPU seconds."""
    eventually_blocking(lambda: len(sampler.stats.series) >= SAMPLES and spent() >= WORK_S, WITHIN_S, what, every=0.05)


def test_a_busy_neighbour_on_the_target_cpu_is_reported_and_not_counted_as_the_target() -> None:
    target = subprocess.Popen(["taskset", "-c", str(CPU), sys.executable, "-c", "import time; time.sleep(30)"])
    neighbour = subprocess.Popen(["taskset", "-c", str(CPU), sys.executable, "-c", SPIN])
    try:
        with TreeSampler(target.pid, {CPU}, interval_s=0.5) as sampler:
            eventually_blocking(lambda: len(sampler.stats.series) >= SAMPLES, WITHIN_S, "samples", every=0.05)
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
            _sample_until(sampler, lambda: sum(child.cpu_times()[:2]) - spent_before, "the child's CPU")
        # What the child really got: on a busy machine a spinning process may get far less than a core.
        child_cores = (sum(child.cpu_times()[:2]) - spent_before) / (time.monotonic() - started)
    finally:
        for proc in psutil.Process(parent.pid).children(recursive=True):
            proc.kill()
        parent.kill()
        parent.wait()
    assert child_cores > 0
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

        def reaped() -> float:
            return float(sum(psutil.Process(forker.pid).cpu_times()[2:4]))

        reaped_before, started = reaped(), time.monotonic()
        with TreeSampler(forker.pid, interval_s=0.5, known=lambda: {"postgres": forker.pid}) as sampler:
            _sample_until(sampler, lambda: reaped() - reaped_before, "the reaped children's CPU")
        # What the children really got: on a busy machine they may get far less than a core.
        children_cores = (reaped() - reaped_before) / (time.monotonic() - started)
    finally:
        forker.kill()
        forker.wait()
    assert children_cores > 0
    assert sampler.stats.cpu_cores_mean is not None
    assert sampler.stats.cpu_cores_mean >= 0.7 * children_cores  # as the target
    assert sampler.stats.roles_cores_mean["postgres"] >= 0.7 * children_cores  # as a dependency


def _spinning_then_idle(queue_s: float, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A target that works off `queue_s` CPU seconds (its own, however long the machine makes that take),
    then sleeps: the queue an overload leaves, measured in work rather than in time. It is returned once
    its Python has started and says so (a process still starting on a busy machine can wait on the disk
    for whole windows, which reads as idle); it is added to `started` before, for the caller to kill."""
    code = f"import time\nprint('working', flush=True)\nwhile time.process_time() < {queue_s}: pass\ntime.sleep(120)"
    target = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    started.append(target)
    assert target.stdout is not None
    assert target.stdout.readline() == b"working\n"
    return target


def _cpu_seconds(child: subprocess.Popen[bytes]) -> float:
    return float(sum(psutil.Process(child.pid).cpu_times()[:2]))


# The queue the working target serves, in CPU seconds.
QUEUE_S = 1.0
# /proc counts a process's CPU in clock ticks (1/100 s): what psutil reads may trail its own clock by one.
TICK_S = 0.01
# The budget the waits judge against: a target reads as busy while it gets over half of it in a window.
# A spinner gets its share of two cores however busy they are, but with a load of twenty that share can
# drop to a few hundredths of a core for a window, which a budget of half a core would read as idle. Half of
# this budget is under one clock tick per window: a spinner that runs at all is busy, a sleeper spends none.
CORES = 0.01
# Bound on the waits that must end on idleness, not at their timeout: the queue takes seconds even on a
# loaded machine (a spinner given a fifth of a core serves 1 s of CPU in 5 s); a minute is never reached.
UNTIL_S = 60.0


def test_after_an_overload_the_next_step_waits_until_the_target_has_worked_off_its_queue() -> None:
    # A target still serving what an overload queued is waited for until its queue is served; an idle one
    # is not held up until the timeout; one that never settles, only until the timeout.
    started: list[subprocess.Popen[bytes]] = []
    try:
        working, idle, forever = (_spinning_then_idle(queue_s, started) for queue_s in (QUEUE_S, 0.0, 1e9))
        waited = wait_until_idle(lambda: [working.pid], cores=CORES, timeout_s=UNTIL_S)
        assert _cpu_seconds(working) >= QUEUE_S - TICK_S, "returned while the target was still busy"
        assert waited < UNTIL_S, "the busy spell ended long before the timeout"
        # Once idle (its Python started), the idle one is seen idle rather than waited out.
        eventually_blocking(
            lambda: psutil.Process(idle.pid).status() == psutil.STATUS_SLEEPING, deadline_s(), "an idle child"
        )
        assert wait_until_idle(lambda: [idle.pid], cores=CORES, timeout_s=UNTIL_S) < UNTIL_S
        # It returns (or pytest-timeout fails the test), and not before its timeout.
        assert wait_until_idle(lambda: [forever.pid], cores=CORES, timeout_s=1.0) >= 1.0
    finally:
        for child in started:
            child.kill()
            child.wait()
