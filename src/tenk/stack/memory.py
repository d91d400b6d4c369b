"""The memory this machine gives the stack, and the embedded Postgres's share of it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import psutil

# cgroup v2, then v1: a container's cap, which the physical memory psutil reports knows nothing of.
CGROUP_MEMORY_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
# What the same cgroup uses now, v2 then v1, paired with the limits above.
CGROUP_MEMORY_USAGE = (Path("/sys/fs/cgroup/memory.current"), Path("/sys/fs/cgroup/memory/memory.usage_in_bytes"))

MIB = 1024 * 1024
# Postgres's docs' starting point for a dedicated server: a quarter of the memory.
SHARED_BUFFERS_SHARE = 4
# Never under Postgres's own default (128MB); never over 16GB, where the buffer descriptors Postgres
# builds at every start (memory and start-up time for every GB; 0e70afa's message has the figures) buy
# room for data a development stack rarely has.
SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 16 * 1024


def _cgroup_bytes(path: Path) -> int | None:
    """A cgroup memory file's byte count; None when absent or not a number ("max": no cap)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def usable_memory_bytes(cgroup_limits: Iterable[Path] = CGROUP_MEMORY_LIMITS) -> int:
    """Physical memory, or a cgroup's limit where one is set lower ("max" and v1's huge sentinel are no cap)."""
    usable = int(psutil.virtual_memory().total)
    for path in cgroup_limits:
        if (limit := _cgroup_bytes(path)) is not None:
            usable = min(usable, limit)
    return usable


def available_memory_bytes(
    cgroup_limits: Iterable[Path] = CGROUP_MEMORY_LIMITS, cgroup_usage: Iterable[Path] = CGROUP_MEMORY_USAGE
) -> int:
    """Memory a new process can take now: the kernel's estimate, or what a cgroup's cap leaves, if less."""
    available = int(psutil.virtual_memory().available)
    for limit_path, usage_path in zip(cgroup_limits, cgroup_usage, strict=True):
        limit, usage = _cgroup_bytes(limit_path), _cgroup_bytes(usage_path)
        if limit is not None and usage is not None:
            available = min(available, max(limit - usage, 0))
    return available


def auto_shared_buffers(memory_bytes: int) -> str:
    """A quarter of `memory_bytes`, within 128MB-16GB, in Postgres's unit syntax."""
    share_mb = memory_bytes // SHARED_BUFFERS_SHARE // MIB
    return f"{min(max(share_mb, SHARED_BUFFERS_MIN_MB), SHARED_BUFFERS_MAX_MB)}MB"


def shared_buffers_setting(configured: str) -> str:
    """TENK_DATABASE_EMBEDDED_SHARED_BUFFERS as Postgres takes it: `auto` sized to this machine."""
    return auto_shared_buffers(usable_memory_bytes()) if configured == "auto" else configured
