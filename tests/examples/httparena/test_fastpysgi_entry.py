"""HttpArena's fastpysgi-asgi entry, on the fastpysgi the bench gives it (benchmarks/httparena/entries.py), passes
HttpArena's json and async-db checks as the bench runs them: started on a fresh process, waited for, checked.

Its api-4 checks fail (docs/httparena.md): validate.sh's fragmented requests ask it to close their connections,
which fastpysgi mishandles, and its next `/async-db` request crashes it. Being waited for must not do the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.bench_httparena import validate
from benchmarks.httparena.entries import entries

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
