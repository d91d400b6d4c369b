"""CPU lists as taskset writes them ("0-2,5"): which cores the target gets, and which are left over."""

from __future__ import annotations

import os
from contextlib import suppress

import psutil


def cpu_set(cpus: str) -> set[int]:
    """The cores named by a CPU list, e.g. "0-2,5" -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def cpu_count_of(cpus: str | None) -> int:
    """How many cores a CPU list names; no list: every core this process may use."""
    return len(cpu_set(cpus)) if cpus else len(os.sched_getaffinity(0))


def other_cpus(target_cpus: str) -> str | None:
    """Every CPU this process may use that the target does not: the generator's and helpers' share."""
    rest = sorted(os.sched_getaffinity(0) - cpu_set(target_cpus))
    return ",".join(str(c) for c in rest) if rest else None


def pin_tree(pid: int, cpus: set[int]) -> None:
    """Move a running process, its children and all their threads onto `cpus` (children forked later
    inherit it). `sched_setaffinity` on a pid moves one thread only, so each thread is moved."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for process in processes:
        try:
            threads = [thread.id for thread in process.threads()]
        except psutil.Error:
            continue
        for thread in threads:
            with suppress(OSError):  # a thread or process that has just exited
                os.sched_setaffinity(thread, cpus)


def generator_cores(target_cpus: str) -> int:
    """How many cores are left for the generator once the target has `target_cpus`."""
    return len(os.sched_getaffinity(0) - cpu_set(target_cpus))
