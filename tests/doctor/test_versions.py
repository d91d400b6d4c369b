"""The versions doctor reads beside an app, and what it assumes where nothing pins them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tenk.doctor._versions import Condition, Versions, read_versions

PACKAGES = ("fastapi", "pydantic", "starlette")
# Versions as doctor's table lists those it measured, oldest first, and what FastAPI needs of pydantic.
MEASURED = {
    "fastapi": ["0.115.0", "0.125.0", "0.165.0"],
    "pydantic": ["1.10.26", "2.8.0", "2.14.4"],
    "starlette": ["0.38.6", "1.10.0"],
}
REQUIRES = [
    (Condition.parse("fastapi<0.100"), Condition.parse("pydantic<2")),
    (Condition.parse("fastapi>=0.126"), Condition.parse("pydantic>=2")),
]


def versions(folder: Path) -> Versions:
    return read_versions(folder, MEASURED, REQUIRES)


def said(found: Versions) -> dict[str, tuple[str, bool]]:
    return {name: (version.version, version.assumed) for name, version in found.packages.items()}


def test_a_lock_gives_every_version_it_holds(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text(
        'version = 1\n[[package]]\nname = "fastapi"\nversion = "0.110.0"\n'
        '[[package]]\nname = "Pydantic"\nversion = "1.10.13"\n[[package]]\nname = "starlette"\nversion = "0.36.3"\n'
    )
    (tmp_path / "requirements.txt").write_text("pydantic>=2\n")
    (tmp_path / "app").mkdir()
    found = versions(tmp_path / "app")
    assert said(found) == {
        "fastapi": ("0.110.0", False),
        "pydantic": ("1.10.13", False),
        "starlette": ("0.36.3", False),
    }
    assert found.packages["pydantic"].describe() == "pydantic 1.10.13 (uv.lock)"
    assert found.folder == tmp_path


def test_poetry_and_pipfile_locks_are_read(tmp_path: Path) -> None:
    (tmp_path / "poetry.lock").write_text('[[package]]\nname = "fastapi"\nversion = "0.111.1"\n')
    (tmp_path / "Pipfile.lock").write_text(json.dumps({"default": {"pydantic": {"version": "==2.7.4"}}}))
    assert said(versions(tmp_path))["fastapi"] == ("0.111.1", False)
    assert said(versions(tmp_path))["pydantic"] == ("2.7.4", False)


def test_a_pin_is_read_and_a_range_gives_an_assumption_that_says_so(tmp_path: Path) -> None:
    (tmp_path / "requirements-prod.txt").write_text(
        "# the API\nfastapi[standard]==0.112.2  # pinned\npydantic >=2.5, <3 ; python_version >= '3.9'\n"
    )
    found = versions(tmp_path)
    assert said(found)["fastapi"] == ("0.112.2", False)
    assert said(found)["pydantic"] == (MEASURED["pydantic"][-1], True)
    assert "requirements-prod.txt's `pydantic>=2.5, <3` allows" in found.packages["pydantic"].source


def test_an_old_fastapi_makes_pydantic_one_the_assumption(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("fastapi==0.99.1\n")
    found = versions(tmp_path)
    assert said(found)["pydantic"] == ("1.10.26", True)
    assert "fastapi 0.99.1 (requirements.txt) allows" in found.packages["pydantic"].source


def test_pyproject_ranges_in_pep_621_and_poetry_spellings(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\ndependencies = ["fastapi>=0.100"]\n[tool.poetry.dependencies]\npydantic = "^1.10"\n'
    )
    found = versions(tmp_path)
    assert said(found)["pydantic"] == ("1.10.26", True)
    # The newest FastAPI measured that runs on pydantic 1: 0.126 dropped it.
    assert said(found)["fastapi"] == ("0.125.0", True)


def test_nothing_beside_the_app_leaves_every_version_assumed_at_the_newest_measured(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    app = tmp_path / "src" / "app"
    app.mkdir(parents=True)
    found = versions(app)
    assert {name: v.assumed for name, v in found.packages.items()} == dict.fromkeys(PACKAGES, True)
    assert "nothing beside the app names it" in found.packages["fastapi"].source
    assert found.folder is None


def test_the_search_stops_at_the_repository_root(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("pydantic==1.10.2\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert said(versions(repo))["pydantic"][1] is True


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_another_user_owns_does_not_speak_for_the_app(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    app = shared / "app"
    app.mkdir(parents=True)
    (shared / "requirements.txt").write_text("pydantic==1.10.2\n")
    os.chown(shared, 65534, 65534)
    assert said(versions(app))["pydantic"][1] is True
    os.chown(shared, os.getuid(), os.getgid())
    assert said(versions(app))["pydantic"] == ("1.10.2", False)


def test_an_app_found_in_site_packages_is_read_from_what_is_installed(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "fastapi-0.110.3.dist-info").mkdir(parents=True)
    (site / "pydantic-1.10.15.dist-info").mkdir()
    found = versions(site)
    assert said(found)["fastapi"] == ("0.110.3", False)
    assert found.packages["pydantic"].describe() == "pydantic 1.10.15 (installed in site-packages)"
