"""HttpArena's fastpysgi-asgi entry, on the fastpysgi the bench gives it (benchmarks/httparena/entries.py), passes
HttpArena's json and async-db checks as the bench runs them: started on a fresh process, waited for, checked.

Its api-4 checks fail (docs/httparena.md): validate.sh's fragmented requests ask it to close their connections,
which fastpysgi mishandles, and its next `/async-db` request crashes it. Being waited for must not do the same."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from benchmarks.bench_httparena import validate
from benchmarks.httparena.entries import entries

from harness.deadlines import deadline_s
from tests.examples.httparena.entries import entry_env

# Its environment is made from PyPI on the first run (uv's cache makes later ones quick).
pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("profile", ["json", "async-db"])
def test_fastpysgi_asgi_passes_httparena_s_checks_of_the_profiles_without_connection_close(
    arena_database: str, tmp_path: Path, profile: str
) -> None:
    entry = entries()["fastpysgi-asgi"]
    entry.prepare()
    assert validate(entry, profile, entry_env(arena_database), 1, tmp_path) == []


def test_checking_fastpysgi_asgi_with_workers_leaves_none_of_them_running(arena_database: str, tmp_path: Path) -> None:
    # Its workers outlive a SIGTERM to the process the bench started; left, they spin on a CPU the bench measures.
    entry = entries()["fastpysgi-asgi"]
    entry.prepare()
    assert validate(entry, "json", entry_env(arena_database), 2, tmp_path) == []
    (log,) = tmp_path.glob("validate-*.log")
    port = log.stem.rsplit("-", 1)[1]
    found = [p for p in psutil.process_iter(["cmdline"]) if port in (p.info["cmdline"] or [])]
    # A killed worker may still be on its way out, or a zombie no one has reaped yet: neither runs.
    _, alive = psutil.wait_procs(found, timeout=deadline_s())
    left = [p for p in alive if _runs(p)]
    for process in left:  # not left behind by a failing run either
        process.kill()
    assert [process.pid for process in left] == []


def _runs(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
