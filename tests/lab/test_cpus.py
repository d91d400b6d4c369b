"""The lab keeps its own work off the target's cores while a rung runs."""

from __future__ import annotations

import os
import threading

import pytest

from tenk.lab.cpus import LAB_CPUS, cpu_set, other_cpus, staying_on

pytestmark = pytest.mark.skipif(len(LAB_CPUS) < 2, reason="needs a core for the target and one for the rest")


def test_every_thread_of_the_lab_runs_on_the_generators_cores_inside_and_on_all_of_them_after() -> None:
    target = str(min(LAB_CPUS))
    generator = other_cpus(target)
    assert generator is not None
    release, seen = threading.Event(), threading.Event()
    waiting = threading.Thread(target=release.wait)  # started before the move: it must move too
    waiting.start()
    try:
        with staying_on(generator):
            inside = threading.Thread(target=seen.set)
            inside.start()
            inside.join()
            assert os.sched_getaffinity(0) == cpu_set(generator)
            assert waiting.native_id is not None
            assert os.sched_getaffinity(waiting.native_id) == cpu_set(generator)
            # What is left over is still counted from every core the lab was given, not from where it runs.
            assert other_cpus(target) == generator
            assert cpu_set(other_cpus(generator) or "") == LAB_CPUS - cpu_set(generator)
        assert os.sched_getaffinity(0) == LAB_CPUS
        assert os.sched_getaffinity(waiting.native_id) == LAB_CPUS
    finally:
        release.set()
        waiting.join()


def test_no_generator_cores_leaves_the_lab_where_it_is() -> None:
    with staying_on(None):
        assert os.sched_getaffinity(0) == LAB_CPUS
