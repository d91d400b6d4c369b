"""Where a server keeps its files, declared as a table of names under its `data_dir`."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, overload


class _HasDataDir(Protocol):
    data_dir: Path


class InDataDir:
    """A file or directory under the owner's `data_dir`: `pidfile = InDataDir("redis.pid")`.

    The server's layout then reads as one list of names at the top of its class, rather than a property
    apiece; the path follows `data_dir`, which the owners resolve to an absolute path once."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> InDataDir: ...

    @overload
    def __get__(self, instance: _HasDataDir, owner: type) -> Path: ...

    def __get__(self, instance: _HasDataDir | None, owner: type) -> Path | InDataDir:
        return self if instance is None else instance.data_dir / self.name
