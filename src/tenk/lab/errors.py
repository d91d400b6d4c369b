"""What the lab raises: command-line errors, never HTTP ones (so not `tenk.errors.TenkError`s). Each is a
`click.ClickException`: `tenk lab` prints its message and exits non-zero.

click.ClickException
└── LabError                   a run cannot start or continue
    ├── ConfigError            a ladder or mix file is malformed (names file, line and key)
    └── NotReadyError          a process the lab started never answered (carries its log tail)
"""

from __future__ import annotations

from pathlib import Path

import click


class LabError(click.ClickException):
    code = "lab_error"


class ConfigError(LabError):
    code = "config_error"

    def __init__(self, path: Path | str, line: int | None, key: str, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")
        self.path = Path(path)
        self.line = line
        self.key = key


class NotReadyError(LabError):
    code = "not_ready"
