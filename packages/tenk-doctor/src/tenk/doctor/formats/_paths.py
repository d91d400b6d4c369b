from __future__ import annotations

from pathlib import Path


def shown(path: Path, base: Path) -> str:
    """A path relative to `base` where it is under it, as ruff shows them."""
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()
