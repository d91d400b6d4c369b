"""CPU lists as taskset writes them ("0-2,5"): which cores the target gets, and which are left over."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psutil

# Every CPU the lab may use, as it started. While a rung runs, the lab moves itself onto the generator's
# share (`staying_on`), so what is left over for the generator is always counted from this.
LAB_CPUS = frozenset(os.sched_getaffinity(0))


def cpu_set(cpus: str) -> set[int]:
    """The cores named by a CPU list, e.g. "0-2,5" -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def cpu_count_of(cpus: str | None) -> int:
    """How many cores a CPU list names; no list: every core this process may use."""
    return len(cpu_set(cpus)) if cpus else len(LAB_CPUS)


def other_cpus(target_cpus: str) -> str | None:
    """Every CPU this process may use that the target does not: the generator's and helpers' share."""
    rest = sorted(LAB_CPUS - cpu_set(target_cpus))
    return ",".join(str(c) for c in rest) if rest else None


def pinned(argv: list[str], cpus: str | None) -> list[str]:
    """`argv` started on `cpus` (taskset), or as it is when there is no CPU list."""
    return ["taskset", "-c", cpus, *argv] if cpus else argv


def pin_tree(pid: int, cpus: set[int] | frozenset[int]) -> None:
    """Move a running process, its children and all their threads onto `cpus` (children forked later
    inherit it). `sched_setaffinity` on a pid moves one thread only, so each thread is moved."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for process in processes:
        _pin_threads(process, cpus)


def _pin_threads(process: psutil.Process, cpus: set[int] | frozenset[int]) -> None:
    # Every thread the kernel knows, not only Python's: `sched_setaffinity` on a pid moves one thread.
    try:
        threads = [thread.id for thread in process.threads()]
    except psutil.Error:
        return
    for thread in threads:
        with suppress(OSError):  # a thread or process that has just exited
            os.sched_setaffinity(thread, cpus)


def generator_cores(target_cpus: str) -> int:
    """How many cores are left for the generator once the target has `target_cpus`."""
    return len(LAB_CPUS - cpu_set(target_cpus))


@contextmanager
def staying_on(cpus: str | None) -> Iterator[None]:
    """Run this process on `cpus` (None: where it is) and give it every lab CPU back after.

    The lab reads k6's stream, samples /proc and probes the dependencies all through a step; on the
    target's cores that work was counted as the target's neighbours and took CPU from it (the
    search-open-loop runs before and after: docs/results/2026-11-29/search-open-loop-k6/). Threads
    started inside inherit the move.
    """
    if cpus is None:
        yield
        return
    _pin_threads(psutil.Process(), cpu_set(cpus))
    try:
        yield
    finally:
        _pin_threads(psutil.Process(), LAB_CPUS)
