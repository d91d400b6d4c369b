"""The README and the docs site are part of the product.

The README is the front door: short, with the two set-up commands and links that lead somewhere. The site
under docs/ builds strictly (a broken link or anchor fails it) and names every setting in the table that
`tenk settings` prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tenk.settings_doc import env_names, markdown_table

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
SETTINGS_PAGE = (DOCS / "settings.md").read_text()

# [text](target) outside code: the README's relative links, which GitHub and a clone both follow.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(markdown: str) -> list[str]:
    prose = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return [target for target in _LINK.findall(prose) if not re.match(r"[a-z]+:", target)]


def _fenced_block_after(markdown: str, heading: str) -> str:
    section = markdown.split(f"\n{heading}\n", 1)[1]
    return section.split("```", 2)[1]


def test_settings_page_documents_every_setting() -> None:
    missing = [name for name in env_names() if f"`{name}`" not in SETTINGS_PAGE]
    assert not missing, f"docs/settings.md lacks {missing}; paste `tenk settings` into its table"


def test_settings_page_table_is_the_one_generated_from_the_tree() -> None:
    # Catches renamed or removed settings, and stale defaults, which the check above cannot.
    assert markdown_table() in SETTINGS_PAGE, "docs/settings.md's table is stale; paste `tenk settings` into it"


def test_readme_gives_the_two_setup_commands() -> None:
    assert "make run" in README
    assert "make test" in README


def test_readme_is_a_front_door_of_at_most_400_lines() -> None:
    assert len(README.splitlines()) <= 400, "the README is the front door; move the detail to a page under docs/"


def test_readme_links_lead_to_files_that_exist() -> None:
    links = _relative_links(README)
    assert any(link.startswith("docs/") for link in links), "the README should lead to the docs pages"
    broken = [link for link in links if not (ROOT / link.split("#", 1)[0]).exists()]
    assert not broken, f"README links to missing files: {broken}"


def test_readme_and_docs_home_show_the_same_layout() -> None:
    home = (DOCS / "index.md").read_text()
    assert _fenced_block_after(README, "## Layout") == _fenced_block_after(home, "## Layout")


def test_docs_site_builds_strictly_with_every_page_in_the_nav(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stderr + build.stdout
