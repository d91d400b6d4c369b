"""What the lab raises. None of these reach HTTP; the CLI prints them and exits non-zero.

TenkError
└── LabError                   a run cannot start or continue
    ├── ConfigError            a ladder or mix file is malformed (names file, line and key)
    └── NotReadyError          a process the lab started never answered (carries its log tail)
"""

from __future__ import annotations

from pathlib import Path

from tenk.errors import TenkError


class LabError(TenkError):
    code = "lab_error"


class ConfigError(LabError):
    code = "config_error"

    def __init__(self, path: Path | str, line: int | None, key: str, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}", field=key or None)
        self.path = Path(path)
        self.line = line
        self.key = key


class NotReadyError(LabError):
    code = "not_ready"
