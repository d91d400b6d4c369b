"""Every TENK_* setting, as docs/settings.md's table: `tenk settings`, walked from the settings tree."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from tenk.settings import Settings


@dataclass(frozen=True)
class Documented:
    env_name: str
    path: tuple[str, ...]  # where it sits in the tree: ("ingest", "max_backlog")
    field: FieldInfo


def documented(model: type[BaseModel] = Settings, path: tuple[str, ...] = ()) -> Iterator[Documented]:
    """The tree's leaves in declaration order; a branch's variables are TENK_<BRANCH>_<FIELD>."""
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from documented(field.annotation, (*path, name))
        else:
            yield Documented("_".join(("TENK", *path, name)).upper(), (*path, name), field)


def env_names() -> list[str]:
    return [leaf.env_name for leaf in documented()]


def markdown_table() -> str:
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for leaf in documented():
        field = leaf.field
        # validated_data is required by pydantic 2.10, the floor, when a factory is called (later releases
        # default it); no settings factory reads the other fields, so an empty dict is what it sees.
        default = "" if field.is_required() else field.get_default(call_default_factory=True, validated_data={})
        if isinstance(default, list):
            default = ",".join(map(str, default))
        description = (field.description or "").replace("|", "\\|")
        # An empty code span renders as two backticks on GitHub and in MkDocs alike.
        shown = f"`{default}`" if default != "" else "(empty)"
        lines.append(f"| `{leaf.env_name}` | {shown} | {description} |")
    return "\n".join(lines)
