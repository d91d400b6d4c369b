from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from tenk.stack.memory import (
    auto_shared_buffers,
    available_memory_bytes,
    shared_buffers_setting,
    usable_memory_bytes,
)

GIB = 1024**3


@pytest.mark.parametrize(
    ("memory", "shared_buffers"),
    [(24 * GIB, "6144MB"), (2 * GIB, "512MB"), (256 * 1024**2, "128MB"), (512 * GIB, "16384MB")],
)
def test_auto_shared_buffers_is_a_quarter_of_the_memory_within_128mb_and_16gb(memory: int, shared_buffers: str) -> None:
    assert auto_shared_buffers(memory) == shared_buffers


def test_a_named_size_is_passed_to_postgres_as_it_is() -> None:
    assert shared_buffers_setting("2GB") == "2GB"


def test_a_cgroup_limit_below_the_machine_is_the_usable_memory(tmp_path: Path) -> None:
    limit = tmp_path / "memory.max"
    limit.write_text("1073741824\n")
    assert usable_memory_bytes([tmp_path / "missing", limit]) == GIB


@pytest.mark.parametrize("no_cap", ["max\n", "9223372036854771712\n"], ids=["v2 max", "v1 sentinel"])
def test_a_cgroup_without_a_cap_leaves_the_machine_memory(tmp_path: Path, no_cap: str) -> None:
    limit = tmp_path / "memory.max"
    limit.write_text(no_cap)
    assert usable_memory_bytes([limit]) == psutil.virtual_memory().total


def test_what_a_cgroup_cap_leaves_bounds_the_available_memory(tmp_path: Path) -> None:
    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    limit.write_text(f"{2 * GIB}\n")
    usage.write_text(f"{GIB + 5}\n")
    assert available_memory_bytes([limit], [usage]) == GIB - 5
    usage.write_text(f"{3 * GIB}\n")
    assert available_memory_bytes([limit], [usage]) == 0


def test_without_a_cgroup_cap_the_kernels_estimate_is_the_available_memory(tmp_path: Path) -> None:
    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    limit.write_text("max\n")
    usage.write_text(f"{GIB}\n")
    available = available_memory_bytes([limit, tmp_path / "missing"], [usage, tmp_path / "missing-too"])
    # The kernel's estimate moves between two reads; a cap would have put it under 1 GiB or at 0.
    assert available > 0
    assert abs(available - psutil.virtual_memory().available) < 256 * 1024**2
