"""`tenk doctor` as CI runs it: a real process, its exit code, its output, the pre-commit entry."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from harness.deadlines import deadline_s
from harness.stack import VENV_BIN
from tests.doctor.expectations import FIXTURES

REPO = Path(__file__).parents[2]


def doctor(*args: str, cwd: Path = FIXTURES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "tenk"), "doctor", *args], cwd=cwd, capture_output=True, text=True, timeout=deadline_s()
    )


def test_findings_exit_1_and_a_clean_app_exits_0() -> None:
    assert doctor("helpers_chain").returncode == 1
    clean = doctor("lifespan_pool")
    assert (clean.returncode, clean.stdout.splitlines()[-1].startswith("No findings")) == (0, True)


def test_fail_on_error_ignores_warnings() -> None:
    assert doctor("middleware_base", "--fail-on", "warning").returncode == 1
    assert doctor("middleware_base", "--fail-on", "error").returncode == 0
    assert doctor("helpers_chain", "--fail-on", "error").returncode == 1


def test_unreadable_target_exits_2_with_its_reason() -> None:
    result = doctor("no_such_module:app")
    assert result.returncode == 2
    assert "no_such_module: no such module" in result.stderr


def test_output_goes_to_the_named_file_instead_of_stdout(tmp_path: Path) -> None:
    out = tmp_path / "doctor.sarif"
    result = doctor("per_request", "--format", "sarif", "--output", str(out))
    assert result.stdout == ""
    assert json.loads(out.read_text())["version"] == "2.1.0"


def test_module_app_target_is_found_on_the_path_without_being_imported(tmp_path: Path) -> None:
    app = tmp_path / "explosive.py"
    app.write_text(
        "raise SystemExit('imported!')\n"
        "import time\nfrom fastapi import FastAPI\napp = FastAPI()\n"
        "@app.get('/')\nasync def root():\n    time.sleep(1)\n"
    )
    result = doctor("explosive:app", "--format", "json", cwd=tmp_path)
    assert "imported!" not in result.stdout + result.stderr
    assert [f["rule"] for f in json.loads(result.stdout)["findings"]] == ["blocking-call"]


def test_pre_commit_hook_runs_tenk_doctor() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert [(hook["id"], hook["entry"]) for hook in hooks] == [("tenk-doctor", "tenk doctor")]
    # pre-commit's `pip install .` needs tenk-doctor, which only the clone has (`pip install . <member>`).
    assert [hook["additional_dependencies"] for hook in hooks] == [["./packages/tenk-doctor"]]
    assert all((REPO / dependency / "pyproject.toml").is_file() for dependency in hooks[0]["additional_dependencies"])


def test_an_app_wide_note_passes_the_default_fail_on_and_fails_fail_on_note(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "import redis\nfrom fastapi import FastAPI\napp = FastAPI()\ncache = redis.Redis(host='cache')\n"
        "@app.get('/{key}')\ndef cached(key: str):\n    return {'value': cache.get(key)}\n"
    )
    default = doctor(".", cwd=tmp_path)
    assert "sync-route [note]" in default.stdout
    assert default.returncode == 0
    assert doctor(".", "--fail-on", "note", cwd=tmp_path).returncode == 1
