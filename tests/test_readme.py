"""The README is part of the product: it must name every setting and the two set-up commands."""

from __future__ import annotations

from pathlib import Path

from tenk.settings_doc import env_names, markdown_table

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_readme_documents_every_setting() -> None:
    missing = [name for name in env_names() if f"`{name}`" not in README]
    assert not missing, f"README's settings table lacks {missing}; paste `tenk settings` into it"


def test_readme_settings_table_is_the_one_generated_from_the_tree() -> None:
    # Catches renamed or removed settings, and stale defaults, which the check above cannot.
    assert markdown_table() in README, "README's settings table is stale; paste `tenk settings` into it"


def test_readme_gives_the_two_setup_commands() -> None:
    assert "make run" in README
    assert "make test" in README
